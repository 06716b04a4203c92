/**
 * Table settings as the tablet server uses them, read from `~table:<id>` rows and cached: refreshed on
 * demand (the manager's refresh request after a change) and when older than `maxAgeMs`.
 */
import { ExcError } from '../errors.js';
import type { MetaClient } from '../meta/client.js';
import { tableRow } from '../meta/keys.js';
import { tableConfigSchema, type TableConfig } from '../meta/table-config.js';
import type { TableState } from '../meta/views.js';
import type { FilterSpec, IteratorSettings } from '../storage/index.js';

export interface TableSettings {
  id: string;
  name: string;
  state: TableState;
  config: TableConfig;
  /** When the table was last brought back online (ms), if ever. */
  onlineAt?: number;
}

export class TableConfigs {
  private readonly cache = new Map<string, { at: number; settings: TableSettings }>();

  constructor(
    private readonly meta: MetaClient,
    private readonly maxAgeMs = 10_000,
  ) {}

  /**
   * The table's settings; UNKNOWN_TABLE when it does not exist. When they cannot be read now, the last
   * settings read are used (settings change rarely; stopping work because the manager is briefly away
   * would be worse); without any, the error is thrown.
   */
  async get(tableId: string): Promise<TableSettings> {
    const cached = this.cache.get(tableId);
    if (cached && Date.now() - cached.at < this.maxAgeMs) return cached.settings;
    try {
      return await this.reload(tableId);
    } catch (err) {
      if (cached && !(err instanceof ExcError && err.code === 'UNKNOWN_TABLE')) return cached.settings;
      throw err;
    }
  }

  /** The settings last read, however old (undefined: never read); for checks that must not wait. */
  cached(tableId: string): TableSettings | undefined {
    return this.cache.get(tableId)?.settings;
  }

  async reload(tableId: string): Promise<TableSettings> {
    const cols = await this.meta.row(tableRow(tableId));
    if (cols.size === 0) {
      this.cache.delete(tableId);
      throw new ExcError('UNKNOWN_TABLE', `table ${tableId} does not exist`, { details: { tableId } });
    }
    const settings: TableSettings = {
      id: tableId,
      name: cols.get('name') ?? tableId,
      state: tableState(cols.get('state')),
      config: tableConfigSchema.parse(JSON.parse(cols.get('config') ?? '{}')),
      ...(cols.has('onlineAt') ? { onlineAt: Number(cols.get('onlineAt')) } : {}),
    };
    this.cache.set(tableId, { at: Date.now(), settings });
    return settings;
  }
}

const tableState = (value: string | undefined): TableState =>
  value === 'deleting' || value === 'offline' ? value : 'online';

/**
 * What the iterator stack keeps for a table, reading (a scan) or compacting (a reservation) as of now:
 * versions, age-off and table iterators from its settings, filters and delete handling from the caller.
 */
export function iteratorSettings(
  config: TableConfig,
  filters: FilterSpec[],
  dropDeletes: boolean,
  nowMs = Date.now(),
): IteratorSettings {
  return {
    versions: config.versions,
    ...(config.ttlMs === undefined ? {} : { ttlMs: config.ttlMs }),
    nowMs,
    filters,
    dropDeletes,
    ...(config.iterators.length > 0 ? { table: config.iterators } : {}),
  };
}
