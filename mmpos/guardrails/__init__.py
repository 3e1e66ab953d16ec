"""What stands between a user's command and a run that fails late: one line
for bad input (:mod:`.cli`), config keys and constructor arguments checked
before anything is built (:mod:`.config_check`), datasets checked against
their annotations (:mod:`.data_check`), and the launch itself: work dir,
resume, checkpoints named by the config, CPU process groups (:mod:`.launch`).
"""
