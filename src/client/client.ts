/**
 * The client library: ingest into and scan a table without knowing where its tablets live.
 *
 * It asks the manager for the table's tablets and their locations, sends each batch to the tablet server
 * hosting the tablet its rows fall into, and follows tablets that move: on NOT_SERVING (or a server that
 * is gone) it refreshes the locations and tries again, waiting for a tablet to be hosted again for up to
 * `moveTimeoutMs`. A tablet that split or merged (TABLET_CHANGED, or its row gone) is looked up again:
 * a batch is cut by the tablets there are now and each piece sent under the batch's name with the rows it
 * was cut to, so that every entry is applied once (meta/ingest-ids.ts); a scan goes on from the last row
 * it returned, in whichever tablet holds the next one.
 */
import { ExcError } from '../errors.js';
import { ulid } from '../ids.js';
import type { Logger } from '../log.js';
import type { MetaClient } from '../meta/client.js';
import { ALL_ROWS, intersectRows, isEmptyRange, rowInRows, type HexRange } from '../meta/rows.js';
import { tableOfflineError, type TableInfo, type TabletView } from '../meta/views.js';
import { PeerClients } from '../rpc/peers.js';
import { backoffDelay, sleep } from '../retry.js';
import type { WireEntry } from '../rpc/entries.js';
import { utf8Bytes } from '../validate.js';
import { router, routesOf, rowsOfView, tabletFor } from './routing.js';

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
  /** Tables the last look-up found offline: their calls fail at once with TABLE_OFFLINE. */
  private readonly offline = new Set<string>();
  private readonly tableInfos = new Map<string, TableInfo>();

  constructor(private readonly options: ExcClientOptions) {
    this.peers = new PeerClients({
      secret: options.secret,
      timeoutMs: options.timeoutMs ?? 30_000,
      logger: options.logger,
    });
  }

  /** The table's tablets with their locations, fresh from the manager. */
  async tablets(table: string): Promise<TabletView[]> {
    const tablets: TabletView[] = [];
    let shown: { table: TableInfo; tablets: TabletView[]; next?: string } | undefined;
    do {
      const after = shown?.next === undefined ? '' : `?after=${encodeURIComponent(shown.next)}`;
      shown = await this.options.meta.call<{ table: TableInfo; tablets: TabletView[]; next?: string }>(
        'GET',
        `/v1/tables/${encodeURIComponent(table)}${after}`,
        undefined,
        { idempotent: true },
      );
      tablets.push(...shown.tablets);
    } while (shown.next !== undefined);
    shown = { ...shown, tablets };
    this.tabletCache.set(table, shown.tablets);
    this.tableInfos.set(table, shown.table);
    this.offline.delete(table);
    if (shown.table.state === 'offline') this.offline.add(table);
    return shown.tablets;
  }

  /** The table as the manager last described it (its id, state and settings). */
  async table(name: string): Promise<TableInfo> {
    return this.tableInfos.get(name) ?? (await this.tablets(name), this.tableInfos.get(name)!);
  }

  /** POSTs a request any number of repeats of which do what one does to the tablet's host (onTablet). */
  async postToTablet<T>(table: string, tablet: string, path: string, body: unknown): Promise<T> {
    return this.onTablet(table, tablet, (server) =>
      this.peers.get(server).post<T>(path, body, { idempotent: true }),
    );
  }

  /**
   * Writes entries (puts and deletes). Resolves with the number written.
   *
   * The entries are cut, in the order given, into batches of `batchSize` entries (or `batchBytes`), each
   * named `<requestId>.<n>`; a batch is sent, in a piece per tablet its rows fall in (at once, to their
   * tablets), before the next. A tablet applies each entry of a name once — its record of the name says
   * which rows of it were applied, and survives splits and merges (meta/ingest-ids.ts) — so a batch whose
   * answer was lost is simply sent again. A batch is what the entries make, whatever the tablets are, so
   * calling `ingest` again with the same entries and the same `requestId` after a failure is safe too,
   * within INGEST_DEDUPE_MS (15 minutes, how long a tablet remembers a name), when `skipBatches` is the
   * number of batches the failed call had acknowledged (`onBatch` heard of): those are not sent again,
   * however long ago they were applied, and the ones after them, applied at most moments before the
   * failure, are recognised. Without `skipBatches`, a call that ran longer than that would write its first
   * batches twice. `onBatch` hears of each batch once every piece was acknowledged, and whether every
   * entry had been applied before (`duplicate`).
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
    const maxEntries = this.options.batchSize ?? 5_000;
    const maxBytes = this.options.batchBytes ?? 4 << 20;
    const requestId = options.requestId ?? ulid();
    let batch: PieceEntry[] = [];
    let bytes = 0;
    let written = 0;
    let batches = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const sending = batch;
      batch = [];
      bytes = 0;
      const n = batches++;
      if (n < skip) return; // acknowledged to an earlier call (the same entries make the same batches)
      const name = `${requestId}.${n}`;
      const duplicate = await this.sendBatch(table, name, sending);
      written += sending.length;
      options.onBatch?.({ name, entries: sending.length, duplicate });
    };
    let index = 0;
    for await (const e of entries) {
      const where = `entry ${index++}`;
      const row = toBuffer(e.row, `${where}: row`);
      const wire = wireEntry({ ...e, row }, where);
      batch.push({ wire, row });
      bytes += encodedSize(wire);
      if (batch.length >= maxEntries || bytes >= maxBytes) await flush();
    }
    await flush();
    return written;
  }

  /**
   * Sends batch `name`: a piece to each tablet its rows fall in, as the client knows them (the cached
   * view), each with that tablet's rows; resolves whether every entry had been applied before.
   */
  private async sendBatch(table: string, name: string, entries: PieceEntry[]): Promise<boolean> {
    const tablets = this.tabletCache.get(table) ?? (await this.tablets(table));
    const tabletOf = router(tablets);
    const pieces = new Map<string, PieceEntry[]>();
    for (const e of entries) {
      const tablet = tabletOf(e.row);
      const piece = pieces.get(tablet);
      if (piece) piece.push(e);
      else pieces.set(tablet, [e]);
    }
    const routes = routesOf(tablets);
    const answers = await Promise.all(
      [...pieces].map(([tablet, part]) =>
        this.sendPiece(table, name, tablet, part, rowsOfView(routes.named(tablet)!), 0),
      ),
    );
    return answers.every(Boolean);
  }

  /**
   * Sends `entries` of batch `name` (a piece cut to `rows`, or the whole batch) to `tablet`. When the tablet
   * no longer holds their rows (it split or merged), the piece is cut by the table's tablets as they are
   * now and each part sent likewise, under the same name. Resolves whether every entry had been applied
   * before (a repeat).
   */
  private async sendPiece(
    table: string,
    name: string,
    tablet: string,
    entries: PieceEntry[],
    rows: HexRange | undefined,
    depth: number,
  ): Promise<boolean> {
    try {
      const body = {
        tablet,
        requestId: name,
        ...(rows ? { rows } : {}),
        entries: entries.map((e) => e.wire),
      };
      const answer = await this.onTablet(table, tablet, (server) =>
        this.peers.get(server).post<{ duplicate?: boolean }>('/v1/ingest', body, { idempotent: true }),
      );
      return answer.duplicate === true;
    } catch (err) {
      if (!(err instanceof ExcError && err.code === 'TABLET_CHANGED') || depth >= MAX_RECUTS) throw err;
    }
    let duplicate = true;
    for (const t of await this.tablets(table)) {
      const theirs = intersectRows(rows ?? ALL_ROWS, rowsOfView(t));
      if (isEmptyRange(theirs)) continue;
      const part = entries.filter((e) => rowInRows(e.row, theirs));
      if (part.length === 0) continue;
      if (!(await this.sendPiece(table, name, t.tablet, part, theirs, depth + 1))) duplicate = false;
    }
    return duplicate;
  }

  /**
   * Entries of the table in key order, with deletes and versions applied. It reads tablet by tablet from
   * the last row returned, so a tablet that splits or merges meanwhile changes nothing it returns: the
   * tablet is found again, and no row is skipped or returned twice.
   */
  async *scan(table: string, range: ScanRange = {}): AsyncGenerator<ScannedEntry> {
    const start = range.start === undefined ? undefined : toBuffer(range.start, 'start');
    const end = range.end === undefined ? undefined : toBuffer(range.end, 'end');
    let remaining = range.limit ?? Infinity;
    // Where the scan is: before the first row, or after `after` (the last row returned, or a tablet's end).
    let after: Buffer | undefined;
    let tablets = await this.tablets(table);
    for (let changes = 0; remaining > 0;) {
      const t = tabletFor(tablets, after, start);
      if (!t) return;
      const prev = t.prevEndRowHex === null ? null : Buffer.from(t.prevEndRowHex, 'hex');
      if (end && prev && Buffer.compare(prev, end) >= 0) return; // this and later tablets after it
      let page: { entries: WireEntry[]; nextRow: string | null; endRowHex?: string | null };
      try {
        page = await this.onTablet(table, t.tablet, (server) =>
          this.peers.get(server).post<typeof page>(
            '/v1/scan',
            {
              tablet: t.tablet,
              prevEndRowHex: t.prevEndRowHex,
              ...(after ? { afterRow: after.toString('base64') } : {}),
              ...(start ? { startRow: start.toString('base64') } : {}),
              ...(end ? { endRow: end.toString('base64'), endInclusive: true } : {}),
              limit: Math.min(5_000, Number.isFinite(remaining) ? remaining : 5_000),
            },
            { idempotent: true },
          ),
        );
      } catch (err) {
        if (!(err instanceof ExcError && err.code === 'TABLET_CHANGED') || ++changes > MAX_RECUTS) throw err;
        tablets = await this.tablets(table);
        continue;
      }
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
      if (page.nextRow) {
        after = Buffer.from(page.nextRow, 'base64');
        continue;
      }
      // The tablet is done: go on after its end, as the server says it is now.
      const endHex = page.endRowHex === undefined ? t.endRowHex : page.endRowHex;
      if (endHex === null) return;
      after = Buffer.from(endHex, 'hex');
      if (end && Buffer.compare(after, end) >= 0) return;
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
      // Offline when last looked up (by any call): looked up again, it may be back.
      if (this.offline.has(table)) {
        tablets = await this.tablets(table);
        if (this.offline.has(table)) throw tableOfflineError(table);
      }
      const view = routesOf(tablets).named(tablet);
      if (!view) {
        throw new ExcError('TABLET_CHANGED', `tablet ${tablet} of ${table} no longer exists (it merged)`, {
          details: { tablet },
        });
      }
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

/** How often a batch or a scan follows tablets that split or merged before it gives up. */
const MAX_RECUTS = 50;

/** An entry of a batch being sent: as the RPC carries it, and its row. */
interface PieceEntry {
  wire: WireEntry;
  row: Buffer;
}
