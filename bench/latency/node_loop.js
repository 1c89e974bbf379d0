'use strict'
// Worker of run.py: one Node client, kept alive for the whole run, driven over stdin/stdout.
//
//   node node_loop.js sr URL | ioredis HOST PORT
//
// Prints one JSON line when connected ({"ready":true,...}), then for each stdin line
// "run N WARMUP" does WARMUP untimed GETs and N timed ones (one at a time, awaiting each) and
// prints {"total_ns":T,"lat_ns":[...]}; "quit" or EOF closes the client and exits. Both kinds
// run the same loop with one process.hrtime.bigint() pair around each command.
// ioredis comes from bench/node/node_modules (`npm install` there), the binding from bindings-node/.
const path = require('node:path')
const readline = require('node:readline')

const KEY = 'key:__rand_int__'

function write(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

async function round(get, n, warmup) {
  for (let i = 0; i < warmup; i++) await get()
  const lat = new Array(n)
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    const s = process.hrtime.bigint()
    await get()
    lat[i] = Number(process.hrtime.bigint() - s)
  }
  return { total_ns: Number(process.hrtime.bigint() - t0), lat_ns: lat }
}

async function main() {
  const [kind, a, b] = process.argv.slice(2)
  let get, close, meta
  if (kind === 'sr') {
    const sr = require(path.join(__dirname, '..', '..', 'bindings-node'))
    const c = await sr.Client.connect(a)
    get = () => c.execute(['GET', KEY])
    close = () => c.close()
    meta = { binding: require.resolve(path.join(__dirname, '..', '..', 'bindings-node')) }
  } else if (kind === 'ioredis') {
    const from = { paths: [path.join(__dirname, '..', 'node')] }
    const Redis = require(require.resolve('ioredis', from))
    const io = new Redis({ host: a, port: Number(b) })
    await io.ping()
    get = () => io.get(KEY)
    close = async () => io.disconnect()
    meta = { ioredis: require(require.resolve('ioredis/package.json', from)).version }
  } else {
    throw new Error(`node_loop: unknown kind ${kind}`)
  }
  write({ ready: true, node: process.version, ...meta })
  const rl = readline.createInterface({ input: process.stdin })
  for await (const line of rl) {
    const m = /^run (\d+) (\d+)$/.exec(line.trim())
    if (!m) break
    write(await round(get, Number(m[1]), Number(m[2])))
  }
  await close()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
