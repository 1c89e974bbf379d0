// make test-dist: the CommonJS entry point of the installed package loads the native addon from
// the linux-x64-gnu platform package and has its TypeScript types next to it.
//   node smoke.cjs EXPECTED_VERSION
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const version = process.argv[2]
const sr = require('sentinel-recovery')
if (typeof sr.Client !== 'function' || typeof sr.Client.connect !== 'function') throw new Error('no Client')
const main = path.dirname(require.resolve('sentinel-recovery/package.json'))
const pkg = require('sentinel-recovery/package.json')
for (const f of [pkg.types, 'index.mjs', 'index.js']) {
  if (!fs.existsSync(path.join(main, f))) throw new Error(`${f} missing from the main package`)
}
if (fs.readdirSync(main).some((f) => f.endsWith('.node'))) throw new Error('the main package carries a .node')
const platformPkg = require('sentinel-recovery-linux-x64-gnu/package.json')
if (pkg.version !== version || platformPkg.version !== version) {
  throw new Error(`versions ${pkg.version} / ${platformPkg.version} != ${version}`)
}
if (pkg.optionalDependencies['sentinel-recovery-linux-x64-gnu'] !== version) {
  throw new Error('optionalDependencies does not name the platform package at this version')
}
const addon = require.resolve('sentinel-recovery-linux-x64-gnu')
console.log('OK node-cjs', pkg.version, 'addon', path.relative(process.cwd(), addon))
