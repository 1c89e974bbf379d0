'use strict'
// The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
// deadline module): each value as `timeoutMs` of execute() and pipeline(). answers: the GET
// answers; accepted: it answers or times out (a deadline too short for a busy machine); refused:
// the call rejects with the `config` error whose message starts "timeout must be", nothing sent.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('..')
const { startTopology } = require('./helpers')

const CASES_FILE = path.resolve(__dirname, '../../tests/cases/timeouts.tsv')

function loadCases() {
  const cases = fs
    .readFileSync(CASES_FILE, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((line) => {
      const f = line.split('\t')
      assert.equal(f.length, 3, `${CASES_FILE}: three tab-separated fields in ${JSON.stringify(line)}`)
      const [value, expect, why] = f
      assert.ok(['answers', 'accepted', 'refused'].includes(expect), `${value}: expect ${expect}`)
      const ms = value === 'inf' ? Infinity : Number(value)
      return { value, ms, expect, why }
    })
  assert.ok(cases.length >= 8, `${CASES_FILE}: ${cases.length} cases`)
  return cases
}

let topo
let client

before(async () => {
  topo = await startTopology()
  client = await Client.connect(topo.url)
})

after(async () => {
  if (client) await client.close()
  if (topo) await topo.down()
})

for (const c of loadCases()) {
  test(`timeout case ${c.value} ms (${c.why})`, async () => {
    const calls = [
      () => client.execute(['GET', 'timeout-case:absent'], { timeoutMs: c.ms }),
      async () => (await client.pipeline([['GET', 'timeout-case:absent']], { timeoutMs: c.ms }))[0],
    ]
    for (const call of calls) {
      // refused: rejects (never throws synchronously), nothing sent
      if (c.expect === 'answers') {
        assert.equal(await call(), null)
      } else if (c.expect === 'accepted') {
        try {
          assert.equal(await call(), null)
        } catch (e) {
          assert.equal(e.code, 'timeout', String(e))
        }
      } else {
        await assert.rejects(call, (e) => {
          assert.equal(e.code, 'config', String(e))
          assert.match(e.message, /^timeout must be/)
          return true
        })
      }
    }
  })
}
