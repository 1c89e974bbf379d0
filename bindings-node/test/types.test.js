'use strict'
// The TypeScript declarations against the code: test/types/usage.ts (how a TypeScript user calls
// the package) must compile with the shipped index.d.ts and ioredis.d.ts, strict and without
// skipLibCheck; and every value the declarations export must exist in the CommonJS and ES module
// entry points, and every one those export must be declared.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const ts = require('typescript')

const root = path.join(__dirname, '..')

test('usage.ts compiles against the declarations', () => {
  const tsc = require.resolve('typescript/bin/tsc')
  const run = spawnSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types')], { encoding: 'utf8' })
  assert.equal(run.status, 0, `tsc failed:\n${run.stdout}${run.stderr}`)
})

/** The names of the values (not types) a declaration file exports. */
function declaredValues(file) {
  const program = ts.createProgram([file], { strict: true, noEmit: true, types: ['node'] })
  const checker = program.getTypeChecker()
  const module = checker.getSymbolAtLocation(program.getSourceFile(file))
  return checker
    .getExportsOfModule(module)
    .filter((s) => {
      const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s
      return (target.flags & ts.SymbolFlags.Value) !== 0
    })
    .map((s) => s.name)
    .sort()
}

for (const [dts, cjs, esm] of [
  ['index.d.ts', 'index.js', 'index.mjs'],
  ['ioredis.d.ts', 'ioredis.js', 'ioredis.mjs'],
]) {
  test(`${dts} declares exactly what ${cjs} and ${esm} export`, async () => {
    const declared = declaredValues(path.join(root, dts))
    assert.ok(declared.length > 0)
    const fromCjs = Object.keys(require(path.join(root, cjs))).sort()
    const fromEsm = Object.keys(await import(path.join(root, esm))).filter((k) => k !== 'default').sort()
    assert.deepEqual(declared, fromCjs, `${dts} against ${cjs}`)
    assert.deepEqual(declared, fromEsm, `${dts} against ${esm}`)
  })
}
