# excompact: one image for every process (manager, tserver, compactor, admin commands).
#   docker build -t excompact .
#   docker run --rm excompact --help
# BASE is any image with Node 20 and npm on Debian bookworm (the test builds it on a local stand-in).

ARG BASE=node:20-bookworm-slim
FROM ${BASE} AS build
WORKDIR /app
# better-sqlite3, zstd-napi and the native merge build their native code here.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/bundle.mjs ./scripts/
RUN npm run build && npm prune --omit=dev
# The native merge (native/merge.c), with the node-gyp that comes with npm, against Node's own headers.
COPY native/merge.c native/binding.gyp ./native/
RUN prefix="$(dirname "$(dirname "$(command -v node)")")" \
 && cd native && node "$prefix/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js" rebuild --nodedir="$prefix"

FROM ${BASE}
WORKDIR /app
# EXC_PORT_FILE: the process writes the port it listens on there, and `excompact health` reads it.
ENV NODE_ENV=production \
    EXC_BIND_HOST=0.0.0.0 \
    EXC_ADVERTISE_HOST=@ip \
    EXC_PORT_FILE=/tmp/excompact.port
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/native/build/Release/excompact_merge.node ./native/build/Release/excompact_merge.node
COPY package.json ./
COPY bin ./bin
# The monitor page's files (`excompact monitor`): served as they are, no build.
COPY web ./web
RUN ln -s /app/bin/excompact.js /usr/local/bin/excompact \
 && ln -s /app/bin/compactor.js /usr/local/bin/compactor \
 && mkdir -p /var/lib/excompact && chown node:node /var/lib/excompact
USER node
ENTRYPOINT ["excompact"]
CMD ["--help"]
