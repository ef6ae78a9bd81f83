"""What Kueue says about a job: its queue's causes (rules_queue), the teams' (rules_teams), the jobs Kueue set aside
without a word (rules_unevaluated), and the cohort's queues they read (cohort); a job waiting for all of its nodes
(rules_provisioning) or for room in one network domain (rules_placement), and what doctor reads for them
(collect_placement)."""
