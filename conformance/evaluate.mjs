// Compares conformance results (checks.json per scenario) with expected-failures.yml. Run by run.sh with the
// node 22 from node_modules:
//   node evaluate.mjs <baseline.yml> <results-dir> <revision>...
// where <results-dir>/<revision>/server-<scenario>-<timestamp>/checks.json was written by
// `conformance server --requirements <revision> -o <results-dir>/<revision>`.
//
// Every scenario a requirement set runs is judged, scored or not_scored alike (the suite's own --expected-failures
// only judges the scored ones, so server-session-lifecycle or http-header-validation could regress unnoticed).
// A scenario fails when any of its checks has status FAILURE (WARNING is a SHOULD: counted and shown, not gating).
// Baseline semantics follow the suite's: a whole-scenario entry excuses every failing check and is stale when the
// scenario passes; a <scenario>:<check-id> entry excuses that check only and is stale when that check succeeds.
// Exit 0: no unexpected failure and no stale entry; 1: otherwise; 2: bad input.

import { readFileSync, readdirSync, existsSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
const [baselinePath, resultsDir, ...revisions] = process.argv.slice(2);
if (!baselinePath || !resultsDir || revisions.length === 0) {
  console.error('usage: node evaluate.mjs <baseline.yml> <results-dir> <revision>...');
  process.exit(2);
}

function die(message) {
  console.error(`evaluate: ${message}`);
  process.exit(2);
}

// --- baseline: the suite's YAML format, plus a mandatory `# reason` comment on every entry -------------------
const doc = YAML.parseDocument(readFileSync(baselinePath, 'utf-8'));
if (doc.errors.length) die(`${baselinePath}: ${doc.errors[0].message}`);
const root = doc.contents;
if (!YAML.isMap(root)) die(`${baselinePath}: expected a mapping with a 'server' list`);
for (const pair of root.items) {
  if (String(pair.key?.value ?? pair.key) !== 'server') die(`${baselinePath}: only a 'server' list is used here`);
}
const seq = doc.get('server', true);
if (!YAML.isSeq(seq)) die(`${baselinePath}: 'server' must be a list`);
const wholesale = new Map(); // scenario -> reason
const perCheck = new Map(); // scenario -> Map(checkId -> reason)
for (const item of seq.items) {
  if (!YAML.isScalar(item) || typeof item.value !== 'string' || !item.value.trim()) {
    die(`${baselinePath}: entry ${JSON.stringify(item?.toJSON?.() ?? item)} is not '<scenario>' or '<scenario>:<check-id>' (no space after the colon)`);
  }
  const entry = item.value.trim();
  const reason = (item.comment ?? '').trim();
  if (!reason) die(`${baselinePath}: entry '${entry}' has no reason (add '  # why' after it)`);
  const colon = entry.indexOf(':');
  if (colon === -1) {
    if (wholesale.has(entry)) die(`${baselinePath}: duplicate entry '${entry}'`);
    wholesale.set(entry, reason);
  } else {
    const scenario = entry.slice(0, colon);
    const check = entry.slice(colon + 1);
    if (!scenario || !check) die(`${baselinePath}: entry '${entry}' needs both sides of the colon`);
    const checks = perCheck.get(scenario) ?? new Map();
    if (checks.has(check)) die(`${baselinePath}: duplicate entry '${entry}'`);
    checks.set(check, reason);
    perCheck.set(scenario, checks);
  }
}
for (const scenario of perCheck.keys()) {
  if (wholesale.has(scenario)) die(`${baselinePath}: '${scenario}' is listed whole and per check; keep one`);
}

// --- requirement sets: which scenarios each revision runs (scored and not_scored) -----------------------------
function requirementSet(revision) {
  const path = join(here, 'node_modules/@modelcontextprotocol/conformance/requirements', `${revision}.yaml`);
  if (!existsSync(path)) die(`no requirement set ${path}`);
  const req = YAML.parse(readFileSync(path, 'utf-8')) ?? {};
  const scored = (req.server ?? []).map((name) => ({ name, scoring: 'scored' }));
  const notScored = (req.not_scored ?? [])
    .filter((e) => e.leg === 'server')
    .map((e) => ({ name: e.scenario, scoring: `not scored: ${e.reason}` }));
  return [...scored, ...notScored];
}

// The suite names result folders server-<scenario>-<ISO timestamp with dashes>.
const stamp = /-\d{4}-\d{2}-\d{2}T[\d-]+Z$/;
function resultsByScenario(dir) {
  const found = new Map();
  if (!existsSync(dir)) return found;
  for (const name of readdirSync(dir)) {
    if (!name.startsWith('server-') || !stamp.test(name)) continue;
    const scenario = name.slice('server-'.length).replace(stamp, '');
    const file = join(dir, name, 'checks.json');
    if (existsSync(file)) found.set(scenario, file);
  }
  return found;
}

// Collapse repeated check ids to one verdict, most severe first (as the suite does).
const severity = { FAILURE: 4, WARNING: 3, SUCCESS: 2, SKIPPED: 1, INFO: 0 };
function collapse(checks) {
  const byId = new Map();
  for (const c of checks) {
    const prev = byId.get(c.id);
    if (!prev || (severity[c.status] ?? 0) > (severity[prev.status] ?? 0)) byId.set(c.id, c);
  }
  return byId;
}

const usedEntries = new Set();
const rows = []; // {revision, scenario, scoring, pass, fail, warn, verdict, notes[]}
const problems = [];

for (const revision of revisions) {
  const results = resultsByScenario(join(resultsDir, revision));
  for (const { name: scenario, scoring } of requirementSet(revision)) {
    const row = { revision, scenario, scoring, pass: 0, fail: 0, warn: 0, verdict: '', notes: [] };
    rows.push(row);
    const file = results.get(scenario);
    const whole = wholesale.has(scenario);
    const listed = perCheck.get(scenario);
    if (whole) usedEntries.add(scenario);
    if (listed) for (const id of listed.keys()) usedEntries.add(`${scenario}:${id}`);
    if (!file) {
      row.verdict = 'UNEXPECTED FAIL';
      row.notes.push('no checks.json: the scenario crashed or timed out');
      problems.push(`${revision} ${scenario}: no result (crashed or timed out)`);
      continue;
    }
    let checks;
    try {
      checks = JSON.parse(readFileSync(file, 'utf-8'));
    } catch (error) {
      checks = [{ id: scenario, status: 'FAILURE', errorMessage: `unreadable checks.json: ${error.message}` }];
    }
    const collapsed = collapse(checks);
    row.pass = checks.filter((c) => c.status === 'SUCCESS').length;
    row.fail = checks.filter((c) => c.status === 'FAILURE').length;
    row.warn = checks.filter((c) => c.status === 'WARNING').length;
    const failing = [...collapsed.values()].filter((c) => c.status === 'FAILURE');
    if (whole) {
      if (failing.length) row.verdict = 'expected fail';
      else if (row.pass > 0) {
        row.verdict = 'STALE';
        problems.push(`${revision} ${scenario}: passes now — remove '${scenario}' from ${baselinePath}`);
      } else row.verdict = 'expected fail'; // nothing ran (all skipped): not evidence of a fix
      continue;
    }
    const unexpected = failing.filter((c) => !listed?.has(c.id));
    const excused = failing.filter((c) => listed?.has(c.id));
    const stale = [...(listed?.keys() ?? [])].filter((id) => collapsed.get(id)?.status === 'SUCCESS');
    for (const c of unexpected) {
      row.notes.push(`${c.id}: ${(c.errorMessage ?? c.description ?? '').replace(/\s+/g, ' ').slice(0, 300)}`);
      problems.push(`${revision} ${scenario}:${c.id} fails (not in the baseline): ${(c.errorMessage ?? '').replace(/\s+/g, ' ').slice(0, 300)}`);
    }
    for (const id of stale) {
      problems.push(`${revision} ${scenario}:${id} passes now — remove '${scenario}:${id}' from ${baselinePath}`);
    }
    if (unexpected.length) row.verdict = 'UNEXPECTED FAIL';
    else if (stale.length) row.verdict = 'STALE';
    else if (excused.length) row.verdict = `pass (${excused.length} check${excused.length > 1 ? 's' : ''} baselined)`;
    else if (row.pass === 0) row.verdict = 'pass (no checks ran)';
    else row.verdict = 'pass';
  }
}

for (const entry of [...wholesale.keys(), ...[...perCheck].flatMap(([s, ids]) => [...ids.keys()].map((id) => `${s}:${id}`))]) {
  if (!usedEntries.has(entry)) problems.push(`baseline entry '${entry}' names no scenario run for ${revisions.join(', ')} — remove it or fix its name`);
}

// --- report ------------------------------------------------------------------------------------------------
const pad = (s, n) => String(s).padEnd(n);
const lines = [];
lines.push(`${pad('revision', 11)} ${pad('scenario', 46)} ${pad('scoring', 32)} ${pad('checks ok/fail/warn', 20)} verdict`);
for (const r of rows) {
  lines.push(`${pad(r.revision, 11)} ${pad(r.scenario, 46)} ${pad(r.scoring, 32)} ${pad(`${r.pass}/${r.fail}/${r.warn}`, 20)} ${r.verdict}`);
  for (const n of r.notes) lines.push(`${' '.repeat(12)}- ${n}`);
}
writeFileSync(join(resultsDir, 'summary.txt'), lines.join('\n') + '\n');
if (process.env.CONFORMANCE_VERBOSE === '1') console.log(lines.join('\n') + '\n');

console.log(`${pad('revision', 11)} ${pad('scenarios', 10)} ${pad('pass', 6)} ${pad('baselined', 10)} ${pad('UNEXPECTED', 11)} ${pad('STALE', 6)} warnings`);
for (const revision of revisions) {
  const rs = rows.filter((r) => r.revision === revision);
  const count = (pred) => rs.filter(pred).length;
  console.log(
    `${pad(revision, 11)} ${pad(rs.length, 10)} ${pad(count((r) => r.verdict.startsWith('pass')), 6)} ` +
      `${pad(count((r) => r.verdict === 'expected fail'), 10)} ${pad(count((r) => r.verdict === 'UNEXPECTED FAIL'), 11)} ` +
      `${pad(count((r) => r.verdict === 'STALE'), 6)} ${rs.reduce((n, r) => n + r.warn, 0)}`,
  );
}
const passing = rows.filter((r) => r.verdict.startsWith('pass') && !r.verdict.includes('no checks'));
console.log(`\npassing: ${[...new Set(passing.map((r) => r.scenario))].sort().join(', ')}`);
console.log(`per-scenario table: ${join(resultsDir, 'summary.txt')} (CONFORMANCE_VERBOSE=1 prints it)`);

if (problems.length) {
  console.log('\nPROBLEMS:');
  for (const p of problems) console.log(`  - ${p}`);
  const staleOnly = problems.every((p) => p.includes('remove'));
  console.log(staleOnly
    ? '\nThe baseline is stale: remove the entries named above from expected-failures.yml.'
    : '\nUnexpected conformance failures: fix the server, or (only for fixture-dependent scenarios) baseline them with a reason.');
  process.exit(1);
}
console.log('\nOK: every failure is in the baseline and every baselined entry still fails.');
