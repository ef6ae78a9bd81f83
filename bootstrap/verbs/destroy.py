"""`python -m bootstrap destroy --stack S`: export FSx to S3, destroy the stack, keep the bucket.

The safe way to tear a stack down:

1. reads the stack's state and config and prints what will be deleted, in
   which order, and what is kept (the bucket, the EKS log group, the KMS
   key's waiting period);
2. refuses when the bucket would be deleted with objects in it, unless
   --delete-bucket-data says so; asks you to type the stack name (or --yes);
3. runs `pulumi destroy` with the program (Automation API, run_program), so
   the delete hooks run: every S3 link exports the file system first, and a
   failed or timed-out export stops the destroy with the data in place;
4. prints what was kept, and the exact line that makes the next `pulumi up`
   link the kept bucket instead of creating a new one.

Exit codes: 0 destroyed (or nothing to destroy); 1 a bad stack (every
problem listed: the destroy runs the program, which refuses it), refused or
failed (the pulumi CLI's failure, whatever its cause); 2 the stack cannot
be read (an unreadable stack file, no CLI, no login, no such stack).
"""

from __future__ import annotations

import argparse

from bootstrap.deployed.teardown import run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap destroy", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="the stack to destroy (Pulumi.<stack>.yaml)")
    parser.add_argument("--yes", action="store_true", help="do not ask; destroy after printing the report")
    parser.add_argument("--delete-bucket-data", action="store_true",
                        help="with storage.retainOnDestroy: false, delete the bucket even if it holds objects")
    parser.add_argument("--skip-export", action="store_true",
                        help="delete the file system without exporting it to S3 first (its unexported files are lost)")
    return run(parser.parse_args(argv))
