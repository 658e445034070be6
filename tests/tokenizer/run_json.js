// Runs a command with `input` on stdin and returns its stdout parsed as JSON; exits the process
// with the command's stderr when it fails. Shared by the comparison scripts.
const { spawnSync } = require('child_process');

module.exports = function runJson(command, args, input) {
  const r = spawnSync(command, args, { input, maxBuffer: 1 << 28, encoding: 'utf8' });
  if (r.status !== 0) {
    console.error(`${command} failed (exit ${r.status}):\n${r.stderr}`);
    process.exit(1);
  }
  return JSON.parse(r.stdout);
};
