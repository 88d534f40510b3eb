-- The noisy neighbour of the incident scenario, untagged: a report that
-- scans the accounts of one branch. Run it with an application_name of
-- its own so that qtop --group-by application can find it:
--   PGAPPNAME=batchjob pgbench -n -c 4 -T 60 -f testdata/pgbench/noisy-untagged.sql DB
\set bid random(1, :scale)
SELECT sum(abalance), count(*) FROM pgbench_accounts WHERE bid = :bid;
