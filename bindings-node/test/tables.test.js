'use strict'
// The error codes and event kinds of this package are the core's: the generated tables.js (and
// what index.js builds from it) is compared at run time with the list the native module reads
// from the core (ErrorCode::ALL, EventKind::TABLE). `make test` separately checks that tables.js
// is what the generator writes today.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const native = require('../native.js')
const tables = require('../tables.js')
const sr = require('..')

test('tables.js has the core error codes: names, integers and descriptions, in order', () => {
  const core = native.errorCodes()
  assert.ok(core.length >= 13)
  assert.deepEqual(
    Object.entries(tables.ERROR_CODES).map(([name, [value, description]]) => ({ name, value, description })),
    core.map(({ name, value, description }) => ({ name, value, description })),
  )
})

test('tables.js has the core event kinds: names, integers and descriptions, in order', () => {
  const core = native.eventKinds()
  assert.ok(core.length >= 11)
  assert.deepEqual(
    Object.entries(tables.EVENT_KINDS).map(([name, [value, description]]) => ({ name, value, description })),
    core.map(({ name, value, description }) => ({ name, value, description })),
  )
})

test('one exported error class per core code, named after it, in both entry points', async () => {
  const codes = native.errorCodes().map((c) => c.name)
  assert.deepEqual(Object.keys(sr.ERROR_CLASSES), codes)
  const esm = await import('../index.mjs')
  for (const code of codes) {
    const Class = sr.ERROR_CLASSES[code]
    const name = code.replace(/(^|_)([a-z])/g, (_, __, c) => c.toUpperCase()) + 'Error'
    assert.equal(Class.name, name)
    assert.equal(sr[name], Class, `${name} exported`)
    assert.equal(esm[name], Class, `${name} exported by index.mjs`)
    const e = new Class('m', code)
    assert.ok(e instanceof sr.SentinelRecoveryError)
    assert.equal(e.name, name)
    assert.equal(e.code, code)
  }
  assert.equal(sr.ERROR_CLASSES.internal, sr.InternalError)
})

test('EVENT_KINDS is the core list, with the new kinds', () => {
  assert.deepEqual(
    sr.EVENT_KINDS,
    native.eventKinds().map((k) => k.name),
  )
  for (const kind of ['failover_started', 'sentinel_tilt', 'sentinel_service_unknown']) {
    assert.ok(sr.EVENT_KINDS.includes(kind), kind)
  }
})

test('native errors carry their stable code as a property; a panic is internal', () => {
  // Thrown by the native module: the code is a property, the message has no "code: " prefix.
  // (In a child process, whose stderr takes the panic message Rust prints.)
  const r = spawnSync(
    process.execPath,
    [
      '-e',
      `try { require(process.argv[1]).panicForTest() } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }`,
      path.resolve(__dirname, '..', 'native.js'),
    ],
    { encoding: 'utf8' },
  )
  assert.equal(r.status, 0, r.stderr)
  assert.deepEqual(JSON.parse(r.stdout), {
    code: 'internal',
    message: 'internal error (a bug in sentinel-recovery): panic: a test panic',
  })
  // Through index.js: the matching class, with the core's message as it is.
  assert.throws(
    () => sr.Client.open('redis://127.0.0.1:6379'),
    (e) => {
      assert.ok(e instanceof sr.ConfigError, `${e.name}: ${e.message}`)
      assert.equal(e.code, 'config')
      assert.ok(!e.message.startsWith('config:'), e.message)
      return true
    },
  )
})
