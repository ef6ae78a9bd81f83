"""What Kueue says about a job: its queue's causes (rules_queue), the teams' (rules_teams), the jobs Kueue set aside
without a word (rules_unevaluated), and the cohort's queues they read (cohort)."""
