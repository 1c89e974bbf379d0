'use strict'
// The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
// deadline module): each value as `timeoutMs` of execute() and pipeline(). answers: the GET
// answers; accepted: it answers or times out (a deadline too short for a busy machine); refused:
// the call rejects with the `config` error whose message starts "timeout must be", nothing sent.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const { caseRows, startTopology } = require('./helpers')

const CASES = caseRows('timeouts.tsv', 3, 8).map(([value, expect, why]) => {
  assert.ok(['answers', 'accepted', 'refused'].includes(expect), `${value}: expect ${expect}`)
  return { value, ms: value === 'inf' ? Infinity : Number(value), expect, why }
})

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

for (const c of CASES) {
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
