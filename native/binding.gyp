{
  "targets": [
    {
      "target_name": "excompact_merge",
      "sources": ["merge.c"],
      "cflags": ["-O3", "-std=c11", "-Wall", "-Wextra"],
      "xcode_settings": { "OTHER_CFLAGS": ["-O3"] }
    }
  ]
}
