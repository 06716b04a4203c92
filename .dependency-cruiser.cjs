/**
 * The shape of the code (../shared/STYLE.md, "Layout shows the architecture"), checked by `npm run check`:
 *
 *   processes   src/cli (assembles the others), src/manager, src/tserver, src/compactor, src/monitor
 *   layers      src/client → src/queue → src/meta → src/rpc → src/storage, src/zk   (each only downward)
 *   base        src/*.ts (errors, log, config, retry, …)
 *
 * No import cycles (type-only imports count: a cycle of types is still two modules that cannot be read
 * apart); layers and base never import a process; a process never imports another (only the CLI
 * assembles them).
 */
const PROCESSES = '^src/(cli|manager|tserver|compactor|monitor)/';

/** A layer may import only the layers below it. */
const above = {
  zk: ['rpc', 'meta', 'queue', 'client', 'storage'],
  storage: ['rpc', 'meta', 'queue', 'client', 'zk'],
  rpc: ['meta', 'queue', 'client', 'zk'],
  meta: ['queue', 'client'],
  queue: ['client'],
};

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment: 'Import cycles make modules that cannot be read, tested or loaded apart.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'layers-not-on-processes',
      comment: 'Processes depend on layers, layers (and the base modules) never on processes.',
      severity: 'error',
      from: { path: '^src/([^/]+\\.ts$|(zk|meta|queue|storage|rpc|client)/)' },
      to: { path: PROCESSES },
    },
    {
      name: 'processes-apart',
      comment: 'A process does not reach into another; the CLI assembles them.',
      severity: 'error',
      from: { path: '^src/(manager|tserver|compactor|monitor)/' },
      to: { path: PROCESSES, pathNot: ['^src/$1/'] },
    },
    ...Object.entries(above).map(([layer, forbidden]) => ({
      name: `layer-order-${layer}`,
      comment: `src/${layer} imports only the layers below it.`,
      severity: 'error',
      from: { path: `^src/${layer}/` },
      to: { path: `^src/(${forbidden.join('|')})/` },
    })),
  ],
  options: {
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^dist/' },
  },
};
