// discovery-client.js runs memcached-elasticache, a third-party npm client of
// ElastiCache's auto discovery, against a configuration endpoint, exactly as an
// application moving from ElastiCache would: the endpoint is all it is given.
// The tests drive it through its standard input and read what it does on its
// standard output, one JSON object a line:
//
//   node discovery-client.js HOST:PORT POLL_MS
//
// It prints {"event":"nodes","nodes":[...]} each time the client's discovery
// finds a new list of nodes (the client's own "autoDiscover" event), and
// {"event":"failure","error":...} when a poll fails ("autoDiscoverFailure").
// Each input line is a request {"id":N,"op":"set"|"get","key":K,"value":V},
// answered by {"id":N,"ok":true|false,"value":...,"error":...} through the
// client's own set and get, which hash the key over the nodes it discovered;
// "server" answers the node the client's hash sends the key to.
'use strict';

const readline = require('readline');
const Client = require('memcached-elasticache');

const [endpoint, pollMs] = process.argv.slice(2);
if (!endpoint || !(Number(pollMs) > 0)) {
  console.error('usage: node discovery-client.js HOST:PORT POLL_MS');
  process.exit(2);
}

function out(obj) {
  process.stdout.write(JSON.stringify(Object.assign({at: new Date().toISOString()}, obj)) + '\n');
}

const client = new Client(endpoint, {
  autoDiscoverInterval: Number(pollMs),
  // A node that went away fails fast rather than holding requests, and is
  // tried again at once when discovery lists it again.
  timeout: 1000,
  retries: 0,
  retry: 1000,
  failures: 1,
  idle: 5000,
});
client.on('autoDiscover', (nodes) => out({event: 'nodes', nodes}));
client.on('autoDiscoverFailure', (err) => out({event: 'failure', error: String(err && err.message || err)}));

readline.createInterface({input: process.stdin}).on('line', (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    out({ok: false, error: 'not JSON: ' + line});
    return;
  }
  const done = (err, value) => out({id: req.id, ok: !err, value: value === undefined ? null : value, error: err ? String(err.message || err) : null});
  switch (req.op) {
    case 'set':
      client.set(req.key, req.value, 0, (err) => done(err));
      break;
    case 'get':
      client.get(req.key, (err, value) => done(err, value));
      break;
    case 'server':
      // The node the client's consistent hash sends the key to now (the
      // memcached module's ring, which memcached-elasticache rebuilds with
      // each list of nodes it discovers).
      done(null, client._innerClient.HashRing.get(req.key));
      break;
    default:
      done(new Error('unknown op ' + req.op));
  }
}).on('close', () => {
  client.end();
  process.exit(0);
});
