'use strict'
// The shared argument text cases (tests/cases/arguments.tsv; the policy lives in the core's
// arguments module, and JavaScript's own number text is its layout): each number as an argument
// of ECHO (ints as BigInt, so that values beyond 2^53 stay exact), and what the server echoes,
// or the `config` error naming the argument for NaN. JavaScript has no 32-bit float: those cases
// are skipped.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const { caseRows, startTopology } = require('./helpers')

const SPECIAL = { inf: Infinity, '-inf': -Infinity, NaN: NaN }
const CASES = caseRows('arguments.tsv', 3, 19).map(([kind, value, text]) => {
  assert.ok(['int', 'float', 'float32'].includes(kind), `${value}: kind ${kind}`)
  return { kind, value, text }
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
