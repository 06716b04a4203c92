/**
 * The client library: ingest into and scan a table without knowing where its tablets live.
 *
 * It asks the manager for the table's tablets and their locations, sends each batch to the tablet server
 * hosting the tablet its rows fall into, and follows tablets that move: on NOT_SERVING (or a server that
 * is gone) it refreshes the locations and tries again, waiting for a tablet to be hosted again for up to
 * `moveTimeoutMs`.
 */
import { ExcError } from '../errors.js';
import { ulid } from '../ids.js';
import type { Logger } from '../log.js';
import type { MetaClient } from '../meta/client.js';
import type { TableInfo, TabletView } from '../meta/views.js';
import { PeerClients } from '../rpc/peers.js';
import { backoffDelay, sleep } from '../retry.js';
import type { WireEntry } from '../rpc/entries.js';
import { utf8Bytes } from '../validate.js';

/** An entry as users give it: byte strings as Buffers or UTF-8 strings. */
export interface ClientEntry {
  row: Buffer | string;
  cf?: Buffer | string;
  cq?: Buffer | string;
  /** Milliseconds; default: the tablet server's clock. */
  ts?: number;
  value?: Buffer | string;
  delete?: boolean;
}

export interface ScannedEntry {
  row: Buffer;
  cf: Buffer;
  cq: Buffer;
  ts: number;
  value: Buffer;
}

/** A batch of an ingest that a tablet acknowledged. */
export interface AcknowledgedBatch {
  /** `<requestId>.<n>`: the name the tablet applies once. */
  name: string;
  entries: number;
  /** The tablet had applied it before (an earlier attempt): nothing was written this time. */
  duplicate: boolean;
}

export interface ScanRange {
  /** First row (inclusive). */
  start?: Buffer | string;
  /** Last row (inclusive). */
  end?: Buffer | string;
  limit?: number;
}

export interface ExcClientOptions {
  meta: MetaClient;
  secret: string;
  logger: Logger;
  timeoutMs?: number;
  /** How long to wait for a tablet that is moving between servers (default 30 s). */
  moveTimeoutMs?: number;
  /** Entries per request (default 5,000). */
  batchSize?: number;
  /**
   * Encoded bytes per request: a batch is sent once its entries pass this size (default 4 MiB). Tablet
   * servers refuse bodies over EXC_RPC_MAX_BODY_BYTES (default 16 MiB) after earlier batches were already
   * written; one entry is at most about 5.6 MiB encoded, so a batch sent on passing 4 MiB stays under it.
   */
  batchBytes?: number;
}

/** A byte string as given; a string as its UTF-8 bytes (BAD_REQUEST naming `what` if it has none: see utf8Bytes). */
const toBuffer = (v: Buffer | string | undefined, what: string): Buffer =>
  v === undefined ? Buffer.alloc(0) : typeof v === 'string' ? utf8Bytes(v, what) : v;

export class ExcClient {
  private readonly peers: PeerClients;
  private readonly tabletCache = new Map<string, TabletView[]>();

  constructor(private readonly options: ExcClientOptions) {
    this.peers = new PeerClients({
      secret: options.secret,
      timeoutMs: options.timeoutMs ?? 30_000,
      logger: options.logger,
    });
  }

  /** The table's tablets with their locations, fresh from the manager. */
  async tablets(table: string): Promise<TabletView[]> {
    const shown = await this.options.meta.call<{ table: TableInfo; tablets: TabletView[] }>(
      'GET',
      `/v1/tables/${encodeURIComponent(table)}`,
      undefined,
      {
        idempotent: true,
      },
    );
    this.tabletCache.set(table, shown.tablets);
    return shown.tablets;
  }

  /**
   * Writes entries (puts and deletes). Resolves with the number written.
   *
   * Each batch sent to a tablet is named `<requestId>.<n>` (n counts the batches of this call, in the
   * order they are sent, one at a time), and a tablet applies a name once, so a batch whose answer was
   * lost is simply sent again. A tablet remembers a name for INGEST_DEDUPE_MS (15 minutes) after applying
   * it; so calling `ingest` again with the same entries and the same `requestId` after a failure is safe
   * when `skipBatches` is the number of batches the failed call had acknowledged (`onBatch` heard of):
   * those are not sent again, however long ago they were applied, and the ones after them, applied at
   * most moments before the failure, are recognised if the call comes within those 15 minutes. Without
   * `skipBatches`, a call that ran longer than that would write its first batches twice. `onBatch` hears of
   * each batch a tablet acknowledged, and whether that tablet had applied it before (`duplicate`).
   */
  async ingest(
    table: string,
    entries: Iterable<ClientEntry> | AsyncIterable<ClientEntry>,
    options: {
      requestId?: string;
      skipBatches?: number;
      onBatch?: (batch: AcknowledgedBatch) => void;
    } = {},
  ): Promise<number> {
    const skip = options.skipBatches ?? 0;
    if (skip > 0 && options.requestId === undefined)
      throw new ExcError('BAD_REQUEST', 'skipBatches repeats an earlier call: give its requestId');
    const tabletOf = router(this.tabletCache.get(table) ?? (await this.tablets(table)));
    const maxEntries = this.options.batchSize ?? 5_000;
    const maxBytes = this.options.batchBytes ?? 4 << 20;
    const requestId = options.requestId ?? ulid();
    const pending = new Map<string, { entries: WireEntry[]; bytes: number }>();
    let written = 0;
    let batches = 0;
    const flush = async (tablet: string): Promise<void> => {
      const batch = pending.get(tablet)?.entries;
      if (!batch || batch.length === 0) return;
      pending.delete(tablet);
      const n = batches++;
      if (n < skip) return; // acknowledged to an earlier call (the same entries make the same batches)
      const body = { tablet, requestId: `${requestId}.${n}`, entries: batch };
      const answer = await this.onTablet(table, tablet, (server) =>
        this.peers.get(server).post<{ duplicate?: boolean }>('/v1/ingest', body, { idempotent: true }),
      );
      written += batch.length;
      options.onBatch?.({
        name: body.requestId,
        entries: batch.length,
        duplicate: answer.duplicate === true,
      });
    };
    let index = 0;
    for await (const e of entries) {
      const where = `entry ${index++}`;
      const row = toBuffer(e.row, `${where}: row`);
      const tablet = tabletOf(row);
      const wire = wireEntry({ ...e, row }, where);
      const batch = pending.get(tablet) ?? { entries: [], bytes: 0 };
      batch.entries.push(wire);
      batch.bytes += encodedSize(wire);
      pending.set(tablet, batch);
      if (batch.entries.length >= maxEntries || batch.bytes >= maxBytes) await flush(tablet);
    }
    for (const tablet of [...pending.keys()]) await flush(tablet);
    return written;
  }

  /** Entries of the table in key order, with deletes and versions applied. */
  async *scan(table: string, range: ScanRange = {}): AsyncGenerator<ScannedEntry> {
    const tablets = await this.tablets(table);
    const start = range.start === undefined ? undefined : toBuffer(range.start, 'start');
    const end = range.end === undefined ? undefined : toBuffer(range.end, 'end');
    let remaining = range.limit ?? Infinity;
    for (const t of tablets) {
      const tEnd = t.endRowHex === null ? null : Buffer.from(t.endRowHex, 'hex');
      const tPrev = t.prevEndRowHex === null ? null : Buffer.from(t.prevEndRowHex, 'hex');
      if (start && tEnd && Buffer.compare(tEnd, start) < 0) continue; // tablet entirely before the range
      if (end && tPrev && Buffer.compare(tPrev, end) >= 0) break; // this and later tablets after it
      let afterRow: string | undefined;
      for (;;) {
        const page = await this.onTablet(table, t.tablet, (server) =>
          this.peers.get(server).post<{ entries: WireEntry[]; nextRow: string | null }>(
            '/v1/scan',
            {
              tablet: t.tablet,
              ...(start ? { startRow: start.toString('base64') } : {}),
              ...(end ? { endRow: end.toString('base64'), endInclusive: true } : {}),
              ...(afterRow ? { afterRow } : {}),
              limit: Math.min(5_000, Number.isFinite(remaining) ? remaining : 5_000),
            },
            { idempotent: true },
          ),
        );
        for (const w of page.entries) {
          if (remaining <= 0) return;
          remaining--;
          yield {
            row: Buffer.from(w.row, 'base64'),
            cf: Buffer.from(w.cf ?? '', 'base64'),
            cq: Buffer.from(w.cq ?? '', 'base64'),
            ts: w.ts ?? 0,
            value: Buffer.from(w.value ?? '', 'base64'),
          };
        }
        if (!page.nextRow || remaining <= 0) break;
        afterRow = page.nextRow;
      }
      if (remaining <= 0) return;
    }
  }

  /**
   * Runs `call` (safe to repeat) against the server hosting `tablet`, following the tablet when it moves:
   * on NOT_SERVING, an unknown outcome or an unreachable server the locations are refreshed and the call
   * repeated, for up to `moveTimeoutMs`.
   */
  private async onTablet<T>(table: string, tablet: string, call: (server: string) => Promise<T>): Promise<T> {
    const deadline = Date.now() + (this.options.moveTimeoutMs ?? 30_000);
    let tablets = this.tabletCache.get(table) ?? (await this.tablets(table));
    for (let attempt = 0; ; attempt++) {
      const view = tablets.find((t) => t.tablet === tablet);
      if (!view) throw new ExcError('NOT_FOUND', `tablet ${tablet} no longer exists in table ${table}`);
      if (view.loc) {
        try {
          return await call(view.loc.server);
        } catch (err) {
          // Worth another try: the tablet moved, or its server cannot serve it right now. Every call made
          // here is safe to repeat (scans, and ingest batches the tablet applies once by their name).
          const again =
            err instanceof ExcError &&
            (err.code === 'NOT_SERVING' || err.code === 'OUTCOME_UNKNOWN' || err.retriable);
          if (!again || Date.now() > deadline) throw err;
        }
      } else if (Date.now() > deadline) {
        throw new ExcError('UNAVAILABLE', `tablet ${tablet} of ${table} is not hosted by any tablet server`, {
          details: { tablet },
        });
      }
      await sleep(backoffDelay(attempt, { maxMs: 1_000 }));
      tablets = await this.tablets(table);
    }
  }
}

/** An entry as RPCs carry it. */
export function toWireEntry(e: ClientEntry): WireEntry {
  return wireEntry(e, 'entry');
}

/** toWireEntry, naming the entry in errors by `where` ("entry 7"). */
function wireEntry(e: ClientEntry, where: string): WireEntry {
  return {
    row: toBuffer(e.row, `${where}: row`).toString('base64'),
    cf: toBuffer(e.cf, `${where}: cf`).toString('base64'),
    cq: toBuffer(e.cq, `${where}: cq`).toString('base64'),
    ...(e.ts === undefined ? {} : { ts: e.ts }),
    value: toBuffer(e.value, `${where}: value`).toString('base64'),
    delete: e.delete ?? false,
  };
}

/** About how many bytes `e` adds to a request body: its base64 fields and the JSON around them. */
function encodedSize(e: WireEntry): number {
  return e.row.length + (e.cf?.length ?? 0) + (e.cq?.length ?? 0) + (e.value?.length ?? 0) + 80;
}

/** Which tablet holds a row: the first whose range (prev, end] does. End rows are decoded once. */
function router(tablets: readonly TabletView[]): (row: Buffer) => string {
  const ends = tablets.map((t) => ({
    tablet: t.tablet,
    end: t.endRowHex === null ? null : Buffer.from(t.endRowHex, 'hex'),
  }));
  return (row) => {
    const found = ends.find((t) => t.end === null || Buffer.compare(row, t.end) <= 0);
    if (!found) throw new ExcError('INTERNAL', 'table has no last tablet');
    return found.tablet;
  };
}
