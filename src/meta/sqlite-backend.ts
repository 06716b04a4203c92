/**
 * The embedded default metadata store (store.ts, SQLite in one file under the data directory) behind the
 * asynchronous interface every backend shares (backend.ts). SQLite answers synchronously from this
 * process, so each call is the store's own; a snapshot is one read transaction, taken synchronously by
 * better-sqlite3 and therefore read whole before it resolves.
 */
import type { MetaBackend, MetaReader } from './backend.js';
import { MetaStore, type MetaStoreOptions } from './store.js';
import type { Mutation, MutationResult, ScanPage, ScanRequest } from './types.js';

export class SqliteBackend implements MetaBackend {
  readonly describe: string;

  constructor(readonly store: MetaStore) {
    this.describe = `sqlite:${store.path}`;
  }

  static open(options: MetaStoreOptions): SqliteBackend {
    return new SqliteBackend(new MetaStore(options));
  }

  get managerEpoch(): number | undefined {
    return this.store.managerEpoch;
  }

  async takeOver(): Promise<number> {
    return this.store.takeOver();
  }

  async storedEpoch(): Promise<number> {
    return this.store.storedEpoch();
  }

  async get(row: string, col: string): Promise<string | undefined> {
    return this.store.get(row, col);
  }

  async row(row: string): Promise<Map<string, string>> {
    return this.store.row(row);
  }

  async scan(request: ScanRequest): Promise<ScanPage> {
    return this.store.scan(request);
  }

  async count(start: string, end: string): Promise<number> {
    return this.store.count(start, end);
  }

  /**
   * A snapshot on a read-only connection of its own, held across `read`'s awaits (WAL keeps it while the
   * manager's connection goes on writing). A store in memory has no second connection: its snapshot is
   * the store itself, consistent only while `read` does not await anything but its reads.
   */
  async snapshot<T>(read: (reader: MetaReader) => Promise<T>): Promise<T> {
    if (this.store.path === ':memory:') return read(readerOf(this.store));
    const connection = new MetaStore({ path: this.store.path, readOnly: true });
    try {
      connection.beginRead();
      return await read(readerOf(connection));
    } finally {
      connection.endRead();
      connection.close();
    }
  }

  async applyBatch(mutations: Mutation[], options: { validated?: boolean } = {}): Promise<MutationResult[]> {
    return this.store.applyBatch(mutations, options);
  }

  async close(): Promise<void> {
    this.store.close();
  }
}

/** A reader over one connection. */
function readerOf(store: MetaStore): MetaReader {
  return {
    get: async (row: string, col: string) => store.get(row, col),
    row: async (row: string) => store.row(row),
    scan: async (request: ScanRequest) => store.scan(request),
  };
}
