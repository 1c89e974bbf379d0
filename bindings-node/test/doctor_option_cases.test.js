'use strict'
// The shared doctor option cases (tests/cases/doctor_options.tsv; the rule lives in the core's
// doctor::Options::from_host): `watchMs` and `pings` of doctor() against a real topology.
// Accepted: a report comes; refused: the `config` error naming the option, nothing sent.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { doctor } = require('..')
const { startTopology } = require('./helpers')

const CASES_FILE = path.resolve(__dirname, '../../tests/cases/doctor_options.tsv')

function loadCases() {
  const cases = fs
    .readFileSync(CASES_FILE, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((line) => {
      const f = line.split('\t')
      assert.equal(f.length, 3, `${CASES_FILE}: three tab-separated fields in ${JSON.stringify(line)}`)
      const [watch, pings, expect] = f
      assert.ok(['accepted', 'refused'].includes(expect), `${line}: expect ${expect}`)
      return { watch, pings, expect }
    })
  assert.ok(cases.length >= 10, `${CASES_FILE}: ${cases.length} cases`)
  return cases
}

let topo

before(async () => {
  topo = await startTopology()
})

after(async () => {
  if (topo) await topo.down()
})

for (const c of loadCases()) {
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
