// rocksort: coordinate-sort SAM/BAM through a temporary RocksDB.
#include "cli.h"

int main(int argc, char** argv) { return rocksort::tools::RocksortMain(argc, argv); }
