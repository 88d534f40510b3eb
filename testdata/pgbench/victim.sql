-- The victims: small tagged point reads of tenant acme, whose latency
-- rises while the noisy neighbour runs although their own load does not:
--   PGAPPNAME=storefront pgbench -n -c 2 -R 50 -T 60 -f testdata/pgbench/victim.sql DB
\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid /*route='GET%20%2Faccount',tenant='acme',tier='T1'*/;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid /*route='POST%20%2Faccount',tenant='acme',tier='T1'*/;
