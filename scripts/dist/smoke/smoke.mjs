// make test-dist: the installed npm packages (ESM entry point) through a kill -9 failover, in a
// folder with nothing but `npm install` of the two tarballs and no Rust toolchain.
//
//   node smoke.mjs URL EXPECTED_VERSION
import { createRequire } from 'node:module'
import { Client } from 'sentinel-recovery'

const [url, version] = process.argv.slice(2)
const require = createRequire(import.meta.url)
const pkg = require('sentinel-recovery/package.json')
if (pkg.version !== version) throw new Error(`version ${pkg.version} != ${version}`)
// The CommonJS entry point gives the same classes.
const cjs = require('sentinel-recovery')
if (cjs.Client !== Client) throw new Error('require() and import give different Client classes')

const key = 'dist:node'
const value = 'from the npm package'
const client = await Client.connect(url)
const switched = new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('no primary_changed within 90 s')), 90_000)
  client.on('event', (event) => {
    if (event.kind === 'primary_changed' && event.old) {
      clearTimeout(timer)
      resolve(event)
    }
  })
})
await client.execute(['SET', key, value])
const got = String(await client.execute(['GET', key]))
if (got !== value) throw new Error(`GET gave ${got}`)
console.log('READY node', pkg.version)
const event = await switched
console.log('SWITCH', JSON.stringify(event.old), '->', JSON.stringify(event.new))
const again = String(await client.execute(['GET', key]))
if (again !== value) throw new Error(`GET after the failover gave ${again}`)
await client.close()
console.log('OK node')
