"""`python -m local.autoscaler <state>/provisioner.json`: the stand-in's process, as `local up` starts it."""

import sys

from local.autoscaler.provisioner import main

sys.exit(main(sys.argv[1:]))
