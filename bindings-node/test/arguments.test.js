'use strict'
// How arguments are encoded, the policy shared by every binding: NaN and lone surrogates are
// refused with ConfigError naming the argument; +/-Infinity as `inf` / `-inf`; integers in
// decimal; other numbers as their shortest round-trip text. The same table as the Python and
// .NET suites.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Client, ConfigError } = require('..')
const { startTopology } = require('./helpers')

let topo
before(async () => {
  topo = await startTopology()
})
after(async () => {
  await topo?.down()
})

const CASES = [
  [2.0, '2'],
  [1.5, '1.5'],
  [0.1, '0.1'],
  [1 / 3, '0.3333333333333333'],
  [-0, '-0'],
  [1e21, '1e+21'],
  [123456789012345680000, '123456789012345680000'],
  [1e-7, '1e-7'],
  [0.000001, '0.000001'],
  [-2.5e-300, '-2.5e-300'],
  [5e-324, '5e-324'],
  [Number.MAX_VALUE, '1.7976931348623157e+308'],
  [Infinity, 'inf'],
  [-Infinity, '-inf'],
  [-7, '-7'],
  [2n ** 63n - 1n, '9223372036854775807'],
  [2n ** 64n - 1n, '18446744073709551615'],
  ['\u{1F600} pair', '\u{1F600} pair'],
]

test('numbers and strings are sent by the shared policy', async () => {
  const c = await Client.connect(topo.url, { decodeResponses: true })
  try {
    for (const [arg, sent] of CASES) {
      assert.equal(await c.execute(['ECHO', arg]), sent, `${typeof arg} ${String(arg)}`)
    }
    // Infinity as Redis writes it: a score that reads back as infinity.
    await c.execute(['DEL', 'node:args:z'])
    await c.execute(['ZADD', 'node:args:z', Infinity, 'm'])
    assert.ok([Infinity, 'inf'].includes(await c.execute(['ZSCORE', 'node:args:z', 'm'])))
  } finally {
    await c.close()
  }
})

test('NaN and lone surrogates are refused with ConfigError before sending', async () => {
  const c = await Client.connect(topo.url, { decodeResponses: true })
  const refused = (message) => (e) => {
    assert.ok(e instanceof ConfigError, `expected ConfigError, got ${e && e.name}: ${e && e.message}`)
    assert.equal(e.code, 'config')
    assert.equal(e.message, message)
    return true
  }
  try {
    await c.execute(['SET', 'node:args:k', 'before'])
    await assert.rejects(c.execute(['SET', 'node:args:k', NaN]), refused('argument 2 is NaN'))
    await assert.rejects(
      c.execute(['SET', 'node:args:\ud800', 'v']),
      refused('argument 1 is not valid Unicode: lone surrogate'),
    )
    await assert.rejects(
      c.execute(['SET', 'node:args:k', 'a\udc00b']),
      refused('argument 2 is not valid Unicode: lone surrogate'),
    )
    await assert.rejects(c.execute(['\udfff']), refused('argument 0 is not valid Unicode: lone surrogate'))
    // Neither was sent, nor its U+FFFD-replaced form.
    assert.equal(await c.execute(['GET', 'node:args:k']), 'before')
    assert.equal(await c.execute(['EXISTS', 'node:args:\ufffd']), 0)
  } finally {
    await c.close()
  }
})

test('strings of every length near the native first read arrive whole, in every UTF-8 width', async () => {
  // The native side reads a string argument in one call when it fits in the room left in its
  // buffer with room for one more character, and asks its length otherwise. The buffer starts
  // at 256 bytes, doubles, and is kept for the next command unless it grew past 64 KiB: after a
  // long argument (which resets it), lengths from 0 to 1 100 bytes cross its edges (about 508
  // and 1 020 bytes) with 1-, 2-, 3- and 4-byte characters ending on each byte.
  const c = await Client.connect(topo.url)
  const long = '\u20ac'.repeat(40000)
  try {
    for (const unit of ['a', '\u00e9', '\u20ac', '\u{1F600}']) {
      assert.deepEqual(await c.execute(['ECHO', long]), Buffer.from(long, 'utf8'))
      for (let n = 0; n <= 1100; n++) {
        const s = 'x'.repeat(n) + unit
        const reply = await c.execute(['ECHO', s])
        assert.deepEqual(reply, Buffer.from(s, 'utf8'), `${n} + U+${unit.codePointAt(0).toString(16)}`)
      }
    }
    const bytes = Buffer.from([0, 255, 13, 10, 128])
    const [a, b, d] = await c.pipeline([['ECHO', long], ['ECHO', bytes], ['ECHO', 'after']])
    assert.deepEqual(a, Buffer.from(long, 'utf8'))
    assert.deepEqual(b, bytes)
    assert.deepEqual(d, Buffer.from('after'))
    assert.deepEqual(await c.execute(['ECHO', new Uint8Array([1, 2, 3])]), Buffer.from([1, 2, 3]))
    assert.deepEqual(await c.execute(['ECHO', '']), Buffer.alloc(0))
  } finally {
    await c.close()
  }
})
