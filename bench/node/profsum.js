// Summarises a .cpuprofile: self time per function (top N), and total share by category.
const fs = require('node:fs')
const prof = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
const self = new Map()
const byId = new Map(prof.nodes.map((n) => [n.id, n]))
const dt = new Map()
for (let i = 0; i < prof.samples.length; i++) dt.set(prof.samples[i], (dt.get(prof.samples[i]) || 0) + (prof.timeDeltas[i] || 0))
let total = 0
for (const [id, t] of dt) {
  const n = byId.get(id)
  const cf = n.callFrame
  const k = `${cf.functionName || '(anon)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`
  self.set(k, (self.get(k) || 0) + t)
  total += t
}
const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(process.argv[3] || 15))
for (const [k, t] of top) console.log(((100 * t) / total).toFixed(1).padStart(5) + '%  ' + k)
