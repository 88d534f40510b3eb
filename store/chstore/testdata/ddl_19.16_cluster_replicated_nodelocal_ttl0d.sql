CREATE DATABASE IF NOT EXISTS qtop;

CREATE TABLE IF NOT EXISTS qtop.schema_migrations
(
    version UInt32,
    name String,
    applied_at DateTime
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/qtop/schema_migrations', '{replica}')
ORDER BY version;

-- migration 1: rollups, hot keys, statements, audit
CREATE TABLE IF NOT EXISTS qtop.rollups
(
    minute DateTime CODEC(DoubleDelta, LZ4),
    writer LowCardinality(String),
    version UInt64 CODEC(T64, LZ4),
    service LowCardinality(String),
    tenant String,
    route LowCardinality(String),
    tier UInt8,
    kind LowCardinality(String),
    count UInt64 CODEC(T64, LZ4),
    errors UInt64 CODEC(T64, LZ4),
    duration_seconds Float64 CODEC(Gorilla, LZ4),
    ru Float64 CODEC(Gorilla, LZ4),
    bytes UInt64 CODEC(T64, LZ4),
    rows UInt64 CODEC(T64, LZ4),
    latency_idx Array(UInt16),
    latency_cnt Array(UInt64)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/qtop/rollups', '{replica}', version)
PARTITION BY toYYYYMMDD(minute)
ORDER BY (tenant, minute, route, kind, service, writer);
CREATE TABLE IF NOT EXISTS qtop.rollups_dist AS qtop.rollups
ENGINE = Distributed(main, qtop, rollups, cityHash64(tenant));
CREATE TABLE IF NOT EXISTS qtop.hot_keys
(
    minute DateTime CODEC(DoubleDelta, LZ4),
    writer LowCardinality(String),
    version UInt64,
    key String,
    tenant String,
    count UInt64 CODEC(T64, LZ4),
    err UInt64 CODEC(T64, LZ4)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/qtop/hot_keys', '{replica}', version)
PARTITION BY toYYYYMMDD(minute)
ORDER BY (minute, key, writer);
CREATE TABLE IF NOT EXISTS qtop.hot_keys_dist AS qtop.hot_keys
ENGINE = Distributed(main, qtop, hot_keys, cityHash64(key));
CREATE TABLE IF NOT EXISTS qtop.statements
(
    time DateTime,
    time_ns UInt32,
    writer LowCardinality(String),
    pid Int32,
    tenant String,
    route LowCardinality(String),
    application LowCardinality(String),
    query String CODEC(ZSTD(1)),
    state LowCardinality(String),
    wait_event_type LowCardinality(String),
    wait_event LowCardinality(String),
    duration_seconds Float64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/qtop/statements', '{replica}')
PARTITION BY toYYYYMMDD(time)
ORDER BY (time, writer, pid, time_ns);
CREATE TABLE IF NOT EXISTS qtop.statements_dist AS qtop.statements
ENGINE = Distributed(main, qtop, statements, cityHash64(tenant));
CREATE TABLE IF NOT EXISTS qtop.audit
(
    time DateTime,
    time_ns UInt32,
    who String,
    action String,
    policy_version UInt64,
    rule String
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/qtop/audit', '{replica}')
PARTITION BY toYYYYMM(time)
ORDER BY (time, time_ns, who, policy_version, action);
CREATE TABLE IF NOT EXISTS qtop.audit_dist AS qtop.audit
ENGINE = Distributed(main, qtop, audit, cityHash64(who));

-- migration 2: pg sampler active-session seconds
ALTER TABLE qtop.rollups ADD COLUMN active_session_seconds Float64 DEFAULT 0 CODEC(Gorilla, LZ4) AFTER rows;
ALTER TABLE qtop.rollups_dist ADD COLUMN active_session_seconds Float64 DEFAULT 0 AFTER rows;

-- migration 3: sums of closed hours
CREATE TABLE IF NOT EXISTS qtop.rollups_sums
(
    kind UInt8,
    hour DateTime,
    gen UInt64,
    minute DateTime,
    tenant String,
    route LowCardinality(String),
    requests UInt64,
    errors UInt64,
    duration_seconds Float64,
    db_seconds Float64,
    ru Float64,
    bytes UInt64
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/qtop/rollups_sums', '{replica}')
PARTITION BY toYYYYMMDD(hour)
ORDER BY (kind, hour, gen, minute, tenant, route);
CREATE TABLE IF NOT EXISTS qtop.rollups_sums_dist AS qtop.rollups_sums
ENGINE = Distributed(main, qtop, rollups_sums, cityHash64(hour));
INSERT INTO qtop.rollups_sums_dist (kind, hour, gen)
SELECT DISTINCT 3, toStartOfHour(minute), 1 FROM qtop.rollups;
