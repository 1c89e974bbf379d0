'use strict'
// The shared doctor option cases (tests/cases/doctor_options.tsv; the rule lives in the core's
// doctor::Options::from_host): `watchMs` and `pings` of doctor() against a real topology.
// Accepted: a report comes; refused: the `config` error naming the option, nothing sent.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { doctor } = require('..')
const { caseRows, startTopology } = require('./helpers')

const CASES = caseRows('doctor_options.tsv', 3, 10).map(([watch, pings, expect]) => {
  assert.ok(['accepted', 'refused'].includes(expect), `${watch} ${pings}: expect ${expect}`)
  return { watch, pings, expect }
})

let topo

before(async () => {
  topo = await startTopology()
})

after(async () => {
  if (topo) await topo.down()
})

for (const c of CASES) {
  test(`doctor options watchMs ${c.watch} pings ${c.pings}`, async () => {
    const options = {}
    if (c.watch !== '-') options.watchMs = Number(c.watch)
    if (c.pings !== '-') options.pings = Number(c.pings)
    if (c.expect === 'accepted') {
      const report = await doctor(topo.url, options)
      assert.ok(report.json, 'a report')
    } else {
      await assert.rejects(doctor(topo.url, options), (e) => {
        assert.equal(e.code, 'config', String(e))
        assert.match(e.message, c.watch !== '-' ? /^watch must be/ : /^pings must be/)
        return true
      })
    }
  })
}
