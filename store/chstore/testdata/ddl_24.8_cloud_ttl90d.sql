CREATE DATABASE IF NOT EXISTS qtop;

CREATE TABLE IF NOT EXISTS qtop.schema_migrations
(
    version UInt32,
    name String,
    applied_at DateTime
)
ENGINE = ReplacingMergeTree()
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
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(minute)
ORDER BY (tenant, minute, route, kind, service, writer)
TTL minute + INTERVAL 7776000 SECOND;
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
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(minute)
ORDER BY (minute, key, writer)
TTL minute + INTERVAL 7776000 SECOND;
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
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(time)
ORDER BY (time, writer, pid, time_ns)
TTL time + INTERVAL 7776000 SECOND;
CREATE TABLE IF NOT EXISTS qtop.audit
(
    time DateTime,
    time_ns UInt32,
    who String,
    action String,
    policy_version UInt64,
    rule String
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(time)
ORDER BY (time, time_ns, who, policy_version, action);

-- migration 2: pg sampler active-session seconds
ALTER TABLE qtop.rollups ADD COLUMN IF NOT EXISTS active_session_seconds Float64 DEFAULT 0 CODEC(Gorilla, LZ4) AFTER rows;

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
ENGINE = MergeTree()
PARTITION BY toYYYYMMDD(hour)
ORDER BY (kind, hour, gen, minute, tenant, route)
TTL hour + INTERVAL 7776000 SECOND;
INSERT INTO qtop.rollups_sums (kind, hour, gen)
SELECT DISTINCT 3, toStartOfHour(minute), 1 FROM qtop.rollups;
