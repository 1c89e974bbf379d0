'use strict'
// The shared argument text cases (tests/cases/arguments.tsv; the policy lives in the core's
// arguments module, and JavaScript's own number text is its layout): each number as an argument
// of ECHO (ints as BigInt, so that values beyond 2^53 stay exact), and what the server echoes,
// or the `config` error naming the argument for NaN. JavaScript has no 32-bit float: those cases
// are skipped.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('..')
const { startTopology } = require('./helpers')

const CASES_FILE = path.resolve(__dirname, '../../tests/cases/arguments.tsv')
const SPECIAL = { inf: Infinity, '-inf': -Infinity, NaN: NaN }

function loadCases() {
  const cases = fs
    .readFileSync(CASES_FILE, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((line) => {
      const f = line.split('\t')
      assert.equal(f.length, 3, `${CASES_FILE}: three tab-separated fields in ${JSON.stringify(line)}`)
      const [kind, value, text] = f
      assert.ok(['int', 'float', 'float32'].includes(kind), `${value}: kind ${kind}`)
      return { kind, value, text }
    })
  assert.ok(cases.length >= 19, `${CASES_FILE}: ${cases.length} cases`)
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
  test(`argument case ${c.kind} ${c.value}`, { skip: c.kind === 'float32' && 'JavaScript has no 32-bit float' }, async () => {
    const number = c.kind === 'int' ? BigInt(c.value) : c.value in SPECIAL ? SPECIAL[c.value] : Number(c.value)
    if (c.text === 'refused') {
      await assert.rejects(client.execute(['ECHO', number]), (e) => {
        assert.equal(e.code, 'config', String(e))
        assert.equal(e.message, 'argument 1 is NaN')
        return true
      })
    } else {
      assert.equal(String(await client.execute(['ECHO', number])), c.text)
    }
  })
}
