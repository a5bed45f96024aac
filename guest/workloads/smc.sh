# Cross-modifying code on two vCPUs (guest/smc-race.c): once one vCPU has
# rewritten a function and said so, the other, after a serializing
# instruction, runs the new code and not a translation of the old.
/bin/smc-race "${ROUNDS:-20000}" || fail "smc-race: a vCPU ran code that another vCPU had overwritten"
mark smc-ok
