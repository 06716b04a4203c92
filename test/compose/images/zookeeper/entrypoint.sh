#!/bin/sh
# Writes zoo.cfg from the official image's variables (those the compose file sets, plus ZOO_CFG_EXTRA:
# extra `key=value` lines separated by spaces, appended last so they win) and runs a standalone server
# in the foreground, logging to the console.
set -eu
cfg=/etc/zookeeper/conf/zoo.cfg
{
  echo "dataDir=${ZOO_DATA_DIR:-/data}"
  echo "tickTime=${ZOO_TICK_TIME:-2000}"
  echo "initLimit=${ZOO_INIT_LIMIT:-5}"
  echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
  echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
  echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
  echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-false}"
  echo "clientPort=2181"
  for line in ${ZOO_CFG_EXTRA:-}; do echo "$line"; done
} > "$cfg"
# Later keys win when ZooKeeper reads the file, but zkServer.sh status greps the first clientPort:
# keep only the last of each key.
tac "$cfg" | awk -F= '!seen[$1]++' | tac > "$cfg.tmp" && mv "$cfg.tmp" "$cfg"
# slf4j-simple: ZooKeeper's log on stderr, where `docker logs` finds it.
exec java -Xmx256m -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
