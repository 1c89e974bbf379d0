'use strict'
// The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads; its
// header describes the columns): each call ends by its deadline with the expected outcome, and
// afterwards no client is left blocked on the server (a timed-out blocking command's connection
// was closed). Commands through `execute`, pipelines through `pipeline` (options.timeoutMs is the
// whole pipeline's deadline), transactions through `transaction` (options.timeoutMs is the whole
// transaction's deadline, until EXEC's reply; a signal), subscriptions through `subscribe` (bounded
// by the client's commandTimeoutMs), diagnoses through `doctor` on the case's URL with
// connect_timeout_ms = timeout_ms, cancellation through an AbortSignal. "paused" cases stop the current primary on a topology
// whose down-after (60 s) is far longer than the case, "failover" cases stall a failover
// (sr-topology's stall-failover); both undo it afterwards and check the client works.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client, Subscription, doctor } = require('..')
const { caseRows, startTopology, waitFor } = require('./helpers')

/** What a call may take beyond its deadline (scheduling on a busy 2-core machine). */
const SLACK_MS = 1000
/** The client default of a per-call or cancel case: long, so only the call's own timeout (or the abort) can end it. */
const LONG_DEFAULT_MS = 30000
/** The client of a "no-primary" case: its only sentinel is a loopback port nobody listens on. */
const NO_PRIMARY_URL = 'redis+sentinel://127.0.0.1:1/mymaster'

function loadCases() {
  const cases = caseRows('deadlines.tsv', 8, 18)
    .map(([name, kind, deadline, state, timeoutMs, blockMs, expect, command]) => {
      assert.ok(['command', 'pipeline', 'transaction', 'subscribe', 'doctor'].includes(kind), `${name}: kind ${kind}`)
      assert.ok(['per-call', 'default', 'cancel'].includes(deadline), `${name}: deadline ${deadline}`)
      assert.ok(['healthy', 'paused', 'failover', 'no-primary'].includes(state), `${name}: state ${state}`)
      assert.ok(['timeout', 'nil', 'config', 'cancelled', 'failure'].includes(expect), `${name}: expect ${expect}`)
      assert.ok(expect !== 'failure' || kind === 'doctor', `${name}: expect failure is a doctor's`)
      assert.ok(kind !== 'doctor' || command === '-' || command.startsWith('watch='), `${name}: doctor options ${command}`)
      return {
        name,
        kind,
        deadline,
        paused: state === 'paused',
        failover: state === 'failover',
        noPrimary: state === 'no-primary',
        timeoutMs: Number(timeoutMs),
        blockMs: Number(blockMs),
        expect,
        commands: command.split(' ; ').map((c) => c.split(' ')),
        // A doctor's options: '-' for none, or 'watch=SECONDS'.
        watchMs: kind === 'doctor' && command.startsWith('watch=') ? Number(command.split('=')[1]) * 1000 : undefined,
      }
    })
  return cases
}

// Each step of a doctor waits for a connect and one reply at most: 3 x timeout_ms in all.
const budgetMs = (c) =>
  (c.kind === 'doctor' && c.deadline === 'default' ? 3 * c.timeoutMs : c.timeoutMs + (c.deadline === 'default' ? c.blockMs : 0)) +
  SLACK_MS

/** A subscribe case's channels: the arguments of its SUBSCRIBE. */
function channelsOf(commands) {
  assert.ok(commands[0][0] === 'SUBSCRIBE' && commands[0].length > 1, `not a SUBSCRIBE: ${commands[0]}`)
  return commands[0].slice(1)
}

async function blockedClients(observer) {
  const info = String(await observer.execute(['INFO', 'clients']))
  const line = info.split(/\r?\n/).find((l) => l.startsWith('blocked_clients:'))
  assert.ok(line, `no blocked_clients in INFO clients: ${info}`)
  return Number(line.split(':')[1])
}

let topo
let observer

before(async () => {
  // A down-after far longer than any case: a paused primary stays the primary (no failover); a
  // failover-timeout as long: a stalled failover is not aborted while a case runs.
  topo = await startTopology(['--replicas', '1', '--down-after', '60000', '--failover-timeout', '60000'])
  observer = await Client.connect(topo.url)
})

after(async () => {
  if (observer) await observer.close()
  if (topo) await topo.down()
})

/** The error code a case expects: the core's code, or 'ABORT_ERR' (the AbortError of an aborted call). */
const CODES = { timeout: 'timeout', config: 'config', cancelled: 'ABORT_ERR' }

let serial = 0
for (const c of loadCases()) {
  test(`deadline case ${c.name}`, async () => {
    const defaultMs = c.deadline === 'default' ? c.timeoutMs : LONG_DEFAULT_MS
    // A no-primary client is opened without waiting: connecting would fail, as none is found.
    const client = c.noPrimary
      ? Client.open(`${NO_PRIMARY_URL}?command_timeout_ms=${defaultMs}`)
      : await Client.connect(`${topo.url}?command_timeout_ms=${defaultMs}`)
    // The fault's undoing while it is in place: `cont PORT` (paused) or `release-failover PORT`.
    let undo
    try {
      const blockedBefore = await blockedClients(observer)
      const key = `deadline-case:${c.name}:${process.pid}:${serial++}`
      const commands = c.commands.map((cmd) => cmd.map((a) => a.replaceAll('{key}', key)))
      const abort = new AbortController()
      const options = c.deadline === 'per-call' ? { timeoutMs: c.timeoutMs } : c.deadline === 'cancel' ? { signal: abort.signal } : undefined
      // The URL a doctor case diagnoses; connect_timeout_ms bounds each of its probes.
      const doctorUrl = `${c.noPrimary ? NO_PRIMARY_URL : topo.url}?connect_timeout_ms=${c.timeoutMs}`
      if (c.paused) {
        const { port } = await topo.cmd('primary')
        assert.ok((await topo.cmd(`stop ${port}`)).ok, `${c.name}: stop ${port}`)
        undo = `cont ${port}`
      } else if (c.failover) {
        const stalled = await topo.cmd('stall-failover')
        assert.ok(stalled.ok, `${c.name}: stall-failover: ${stalled.error}`)
        undo = `release-failover ${stalled.port} 30000`
      }
      const start = Date.now()
      let outcome
      let timer
      try {
        const call =
          c.kind === 'command'
            ? client.execute(commands[0], options)
            : c.kind === 'pipeline'
              ? client.pipeline(commands, options)
              : c.kind === 'transaction'
                ? client.transaction(commands, options)
                : c.kind === 'subscribe'
                  ? client.subscribe(channelsOf(commands), options)
                  : doctor(doctorUrl, { ...options, watchMs: c.watchMs })
        if (c.deadline === 'cancel') timer = setTimeout(() => abort.abort(), c.timeoutMs)
        outcome = await call
      } catch (e) {
        outcome = e
      } finally {
        clearTimeout(timer)
      }
      const took = Date.now() - start
      // Subscribed anyway (the case fails below): don't leave it open.
      if (outcome instanceof Subscription) await outcome.close()
      if (undo !== undefined) {
        const line = undo
        undo = undefined
        assert.ok((await topo.cmd(line)).ok, `${c.name}: ${line}`)
      }
      assert.ok(took <= budgetMs(c), `${c.name}: ended after ${took} ms (allowed ${budgetMs(c)} ms)`)
      if (c.expect === 'nil') {
        assert.equal(outcome, null, `${c.name}: expected a nil reply`)
      } else if (c.expect === 'failure') {
        assert.ok(!(outcome instanceof Error) && outcome?.status !== undefined, `${c.name}: expected a doctor report, got ${String(outcome)}`)
        assert.equal(outcome.status, 'failure', `${c.name}: report status ${outcome.status}: ${outcome.text}`)
      } else {
        assert.ok(outcome instanceof Error, `${c.name}: expected ${c.expect}, got ${String(outcome)}`)
        assert.equal(outcome.code, CODES[c.expect], `${c.name}: ${outcome.message}`)
      }
      if (c.paused || c.failover) {
        assert.equal(String(await client.execute(['PING'], { timeoutMs: 10000 })), 'PONG', `${c.name}: PING after the fault`)
      }
      await waitFor(async () => (await blockedClients(observer)) <= blockedBefore, 5000, `${c.name}: the server still blocks a client`)
    } finally {
      if (undo !== undefined) await topo.cmd(undo)
      await client.close()
    }
  })
}
