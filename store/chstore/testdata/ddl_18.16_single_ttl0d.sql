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
    minute DateTime,
    writer String,
    version UInt64,
    service String,
    tenant String,
    route String,
    tier UInt8,
    kind String,
    count UInt64,
    errors UInt64,
    duration_seconds Float64,
    ru Float64,
    bytes UInt64,
    rows UInt64,
    latency_idx Array(UInt16),
    latency_cnt Array(UInt64)
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(minute)
ORDER BY (tenant, minute, route, kind, service, writer);
CREATE TABLE IF NOT EXISTS qtop.hot_keys
(
    minute DateTime,
    writer String,
    version UInt64,
    key String,
    tenant String,
    count UInt64,
    err UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(minute)
ORDER BY (minute, key, writer);
CREATE TABLE IF NOT EXISTS qtop.statements
(
    time DateTime,
    time_ns UInt32,
    writer String,
    pid Int32,
    tenant String,
    route String,
    application String,
    query String,
    state String,
    wait_event_type String,
    wait_event String,
    duration_seconds Float64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(time)
ORDER BY (time, writer, pid, time_ns);
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
ALTER TABLE qtop.rollups ADD COLUMN active_session_seconds Float64 DEFAULT 0 AFTER rows;

-- migration 3: sums of closed hours
CREATE TABLE IF NOT EXISTS qtop.rollups_sums
(
    kind UInt8,
    hour DateTime,
    gen UInt64,
    minute DateTime,
    tenant String,
    route String,
    requests UInt64,
    errors UInt64,
    duration_seconds Float64,
    db_seconds Float64,
    ru Float64,
    bytes UInt64
)
ENGINE = MergeTree()
PARTITION BY toYYYYMMDD(hour)
ORDER BY (kind, hour, gen, minute, tenant, route);
INSERT INTO qtop.rollups_sums (kind, hour, gen)
SELECT DISTINCT 3, toStartOfHour(minute), 1 FROM qtop.rollups;
