'use strict'
// Listens on N loopback ports, accepts connections and never answers (a hung sentinel). Run as a
// child process so that its accepts do not run on the measured event loop. Prints the ports as one
// JSON line; exits when stdin closes or after MAX_SECONDS. Usage: node hung_server.js [N] [MAX_SECONDS]
const net = require('node:net')

const n = Number(process.argv[2] || 3)
const maxSeconds = Number(process.argv[3] || 900)
const held = new Set()
const servers = []
let listening = 0
for (let i = 0; i < n; i++) {
  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    // paused: never read, never answered; bounded in number
    if (held.size >= 10000) return socket.destroy()
    held.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => held.delete(socket))
  })
  server.listen(0, '127.0.0.1', () => {
    if (++listening === n) console.log(JSON.stringify(servers.map((s) => s.address().port)))
  })
  servers.push(server)
}
const stop = () => process.exit(0)
process.stdin.on('end', stop)
process.stdin.on('close', stop)
process.stdin.resume()
setTimeout(stop, maxSeconds * 1000).unref()
