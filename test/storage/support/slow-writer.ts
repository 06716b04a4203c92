/**
 * A process that writes an object slowly, for the crash test: `slow-writer.ts <root> <name>`. It prints
 * one line once some chunks are on disk, then keeps writing until it is killed.
 */
import { LocalObjectStore } from '../../../src/storage/index.js';

const [root, name] = process.argv.slice(2);
const store = new LocalObjectStore(root!);

async function* body(): AsyncGenerator<Buffer> {
  for (let i = 0; ; i++) {
    // Bigger than the store's write batch, so every chunk reaches the file at once.
    yield Buffer.alloc(2 << 20, i);
    if (i === 2) process.stdout.write('written\n');
    await new Promise((r) => setTimeout(r, 50));
  }
}

await store.write(name!, body());
