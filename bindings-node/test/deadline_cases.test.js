'use strict'
// The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads): each
// call ends by its deadline with the expected outcome, and afterwards no client is left blocked
// on the server (a timed-out blocking command's connection was closed).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('..')
const { startTopology, waitFor } = require('./helpers')

const CASES_FILE = path.resolve(__dirname, '../../tests/cases/deadlines.tsv')
/** What a call may take beyond its deadline (scheduling on a busy 2-core machine). */
const SLACK_MS = 1000
/** The client default of a per-call case: long, so only the call's own timeout can end it. */
const LONG_DEFAULT_MS = 30000

function loadCases() {
  const cases = fs
    .readFileSync(CASES_FILE, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((line) => {
      const f = line.split('\t')
      assert.equal(f.length, 6, `${CASES_FILE}: six tab-separated fields in ${JSON.stringify(line)}`)
      const [name, deadline, timeoutMs, blockMs, expect, command] = f
      assert.ok(['per-call', 'default'].includes(deadline), `${name}: deadline ${deadline}`)
      assert.ok(['timeout', 'nil'].includes(expect), `${name}: expect ${expect}`)
      return { name, perCall: deadline === 'per-call', timeoutMs: Number(timeoutMs), blockMs: Number(blockMs), expect, command: command.split(' ') }
    })
  assert.ok(cases.length > 0, `${CASES_FILE}: no cases`)
  return cases
}

const budgetMs = (c) => c.timeoutMs + (c.perCall ? 0 : c.blockMs) + SLACK_MS

async function blockedClients(observer) {
  const info = String(await observer.execute(['INFO', 'clients']))
  const line = info.split(/\r?\n/).find((l) => l.startsWith('blocked_clients:'))
  assert.ok(line, `no blocked_clients in INFO clients: ${info}`)
  return Number(line.split(':')[1])
}

let topo
let observer

before(async () => {
  topo = await startTopology()
  observer = await Client.connect(topo.url)
})

after(async () => {
  if (observer) await observer.close()
  if (topo) await topo.down()
})

let serial = 0
for (const c of loadCases()) {
  test(`deadline case ${c.name}`, async () => {
    const defaultMs = c.perCall ? LONG_DEFAULT_MS : c.timeoutMs
    const client = await Client.connect(`${topo.url}?command_timeout_ms=${defaultMs}`)
    try {
      const blockedBefore = await blockedClients(observer)
      const key = `deadline-case:${c.name}:${process.pid}:${serial++}`
      const args = c.command.map((a) => a.replaceAll('{key}', key))
      const start = Date.now()
      let outcome
      try {
        outcome = await client.execute(args, c.perCall ? { timeoutMs: c.timeoutMs } : undefined)
      } catch (e) {
        outcome = e
      }
      const took = Date.now() - start
      assert.ok(took <= budgetMs(c), `${c.name}: ended after ${took} ms (allowed ${budgetMs(c)} ms)`)
      if (c.expect === 'timeout') {
        assert.ok(outcome instanceof Error, `${c.name}: expected a timeout, got ${String(outcome)}`)
        assert.equal(outcome.code, 'timeout', `${c.name}: ${outcome.message}`)
      } else {
        assert.equal(outcome, null, `${c.name}: expected a nil reply`)
      }
      await waitFor(async () => (await blockedClients(observer)) <= blockedBefore, 5000, `${c.name}: the server still blocks a client`)
    } finally {
      await client.close()
    }
  })
}
