#!/usr/bin/env python3
"""Unit tests of tests/deb.py's guard against deleting through mounts.

make test-deb LINE=trixie bind-mounts this host's /dev, /tmp and the
checkout into a root; a recursive delete of a directory with those mounts
in it deletes this host's files.  rmtree_nomounts refuses that, and the
root is inside no directory that the test deletes.  Needs root (mount).
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# deb.py imports its neighbour lineinfo.py
sys.path.insert(0, os.path.join(TOP, 'tests'))


def load_deb(line):
    os.environ['LINE'] = line
    spec = importlib.util.spec_from_file_location(f'deb_{line}', os.path.join(TOP, 'tests', 'deb.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class RmtreeNoMounts(unittest.TestCase):
    def setUp(self):
        self.deb = load_deb('bookworm')

    def test_refuses_a_tree_with_a_mount(self):
        with tempfile.TemporaryDirectory() as tmp:
            keep = os.path.join(tmp, 'keep')
            os.makedirs(keep)
            with open(os.path.join(keep, 'precious'), 'w', encoding='utf-8') as f:
                f.write('x')
            tree = os.path.join(tmp, 'tree')
            point = os.path.join(tree, 'root', 'dev')
            os.makedirs(point)
            subprocess.run(['mount', '--bind', keep, point], check=True)
            try:
                with self.assertRaises(self.deb.Fail) as cm:
                    self.deb.rmtree_nomounts(tree)
                self.assertIn(point, str(cm.exception))
                self.assertTrue(os.path.exists(os.path.join(keep, 'precious')))
                self.assertTrue(os.path.exists(point))
            finally:
                subprocess.run(['umount', point], check=True)
            self.deb.rmtree_nomounts(tree)
            self.assertFalse(os.path.exists(tree))
            self.assertTrue(os.path.exists(os.path.join(keep, 'precious')))

    def test_root_outside_what_is_deleted(self):
        # A line of another release than this host's has a root.
        deb = load_deb('bookworm' if self.deb.host_release() == 'trixie' else 'trixie')
        self.assertTrue(deb.IN_ROOT)
        for d in (os.path.dirname(deb.REPO), deb.KEYDIR, deb.SAVED, deb.DEB_NEXT, deb.BINDIR):
            self.assertFalse(os.path.commonpath([d, deb.ROOT]) == d,
                             f'{deb.ROOT} is inside {d}, which the test deletes')


if __name__ == '__main__':
    unittest.main()
