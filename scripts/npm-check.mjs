// Checks that a node_modules holds every package its lock file lists, at the
// version the lock file pins: what scripts/npm-ci.sh trusts instead of a mark
// (a mark survives a node_modules emptied by hand or by `npm ci`).
//
//   node scripts/npm-check.mjs LOCKDIR [ROOT]
//
// reads LOCKDIR/package-lock.json (lockfileVersion 2 or 3) and looks for each
// package under ROOT (default LOCKDIR): ROOT/node_modules/<name>/package.json
// with the pinned version. An optional package (or one for another platform)
// may be missing. Exits 0 when all are there; else 1, naming the first few
// missing on stderr.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const [lockDir, root = lockDir] = process.argv.slice(2);
if (!lockDir) {
  console.error('usage: node scripts/npm-check.mjs LOCKDIR [ROOT]');
  process.exit(2);
}
const lock = JSON.parse(readFileSync(join(lockDir, 'package-lock.json'), 'utf8'));
if (!lock.packages) {
  console.error(`npm-check: ${lockDir}/package-lock.json has no "packages" (lockfileVersion ${lock.lockfileVersion})`);
  process.exit(2);
}
const wrong = [];
let checked = 0;
for (const [path, entry] of Object.entries(lock.packages)) {
  if (!path.startsWith('node_modules/') && !path.includes('/node_modules/')) continue;
  let installed;
  try {
    installed = JSON.parse(readFileSync(join(root, path, 'package.json'), 'utf8'));
  } catch {
    if (!(entry.optional || entry.os || entry.cpu)) wrong.push(`${path} missing`);
    continue;
  }
  checked++;
  if (entry.version && !entry.link && installed.version !== entry.version) {
    wrong.push(`${path} is ${installed.version}, the lock file pins ${entry.version}`);
  }
}
if (wrong.length > 0) {
  console.error(`npm-check: ${root}/node_modules does not match ${lockDir}/package-lock.json (${wrong.length} of ${checked + wrong.length}): ${wrong.slice(0, 5).join('; ')}`);
  process.exit(1);
}
