-- The same noisy neighbour, tagged as an application wrapped with
-- sqlcomment would tag it (tenant bigcorp, route batch/import):
--   PGAPPNAME=batchjob pgbench -n -c 4 -T 60 -f testdata/pgbench/noisy-tagged.sql DB
\set bid random(1, :scale)
SELECT sum(abalance), count(*) FROM pgbench_accounts WHERE bid = :bid /*route='batch%2Fimport',tenant='bigcorp',tier='T3'*/;
