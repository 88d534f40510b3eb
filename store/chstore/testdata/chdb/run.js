// run.js — runs a list of SQL statements on ClickHouse's engine in-process
// (the npm package chdb) and prints the results, for store/chstore's
// modern-engine test (TestModernEngine).
//
//   node run.js version            prints the engine's version()
//   node run.js REQUEST.json       runs the request, prints a JSON reply
//
// REQUEST.json: {"steps": [{"sql": "...", "name": "..."}, ...]}. Steps
// run in order in one session on a fresh temporary data folder; a step
// with a name is a query whose rows are returned (JSONCompactEachRow: 64-bit
// integers as strings, so they stay exact; DateTime as Unix seconds). The reply is
// {"version": "...", "results": {"NAME": [[...], ...]}} or, when a step
// fails, {"error": "...", "step": N, "sql": "..."} with exit status 1.
//
// package-lock.json pins chdb and its Linux x64 engine (with integrity).
// It lists chdb's engines for other platforms by version only, by hand:
// npm ci wants every optional dependency in the lock, and the package
// registry the project installs from carries only the Linux x64 one, so
// `npm install` cannot write them; npm ci skips them on Linux x64.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { Session } = require("chdb");

const settings =
  " SETTINGS output_format_json_quote_64bit_integers = 1, output_format_json_quote_64bit_floats = 0," +
  " output_format_json_quote_denormals = 1, date_time_output_format = 'unix_timestamp'";

function main() {
  const arg = process.argv[2];
  if (!arg) {
    process.stderr.write("usage: node run.js version | REQUEST.json\n");
    process.exit(2);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "qtop-chdb-"));
  const session = new Session(dir);
  try {
    const version = session.query("SELECT version()", "TSVRaw").trim();
    if (arg === "version") {
      process.stdout.write(version + "\n");
      return;
    }
    const req = JSON.parse(fs.readFileSync(arg, "utf8"));
    // Inserted floats read back exactly; the session's time zone is UTC.
    session.query("SET precise_float_parsing = 1, session_timezone = 'UTC'");
    const results = {};
    req.steps.forEach((step, i) => {
      try {
        if (!step.name) {
          session.query(step.sql);
          return;
        }
        const out = session.query(step.sql + settings, "JSONCompactEachRow");
        results[step.name] = out
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l));
      } catch (e) {
        process.stdout.write(JSON.stringify({ error: String(e && e.message ? e.message : e), step: i, sql: step.sql }) + "\n");
        process.exitCode = 1;
        throw e;
      }
    });
    process.stdout.write(JSON.stringify({ version, results }) + "\n");
  } finally {
    session.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

try {
  main();
} catch (e) {
  if (!process.exitCode) {
    process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
    process.exitCode = 1;
  }
}
