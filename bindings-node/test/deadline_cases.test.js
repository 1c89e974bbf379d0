'use strict'
// The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads; its
// header describes the columns): each call ends by its deadline with the expected outcome, and
// afterwards no client is left blocked on the server (a timed-out blocking command's connection
// was closed). Commands through `execute`, pipelines through `pipeline` (options.timeoutMs is the
// whole pipeline's deadline), transactions through `transaction` (options.timeoutMs is the whole
// transaction's deadline, until EXEC's reply; a signal),
// cancellation through an AbortSignal. "paused" cases stop the current primary on a topology
// whose down-after (60 s) is far longer than the case, "failover" cases stall a failover
// (sr-topology's stall-failover); both undo it afterwards and check the client works.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
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
      assert.ok(['command', 'pipeline', 'transaction'].includes(kind), `${name}: kind ${kind}`)
      assert.ok(['per-call', 'default', 'cancel'].includes(deadline), `${name}: deadline ${deadline}`)
      assert.ok(['healthy', 'paused', 'failover', 'no-primary'].includes(state), `${name}: state ${state}`)
      assert.ok(['timeout', 'nil', 'config', 'cancelled'].includes(expect), `${name}: expect ${expect}`)
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
      }
    })
  return cases
}

const budgetMs = (c) => c.timeoutMs + (c.deadline === 'default' ? c.blockMs : 0) + SLACK_MS

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
              : client.transaction(commands, options)
        if (c.deadline === 'cancel') timer = setTimeout(() => abort.abort(), c.timeoutMs)
        outcome = await call
      } catch (e) {
        outcome = e
      } finally {
        clearTimeout(timer)
      }
      const took = Date.now() - start
      if (undo !== undefined) {
        const line = undo
        undo = undefined
        assert.ok((await topo.cmd(line)).ok, `${c.name}: ${line}`)
      }
      assert.ok(took <= budgetMs(c), `${c.name}: ended after ${took} ms (allowed ${budgetMs(c)} ms)`)
      if (c.expect === 'nil') {
        assert.equal(outcome, null, `${c.name}: expected a nil reply`)
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
