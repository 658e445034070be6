// The records of `zaya data prepare` and `zaya tokenizer train` (io/record_reader.h,
// io/document_reader.h): a JSON Lines or text file, possibly gzip or zstd (recognised by content),
// split into records under a small --max-record-bytes and each made a document. The first byte
// picks the format; the rest is the file. A bad record gets a verdict, a bad file a zaya::Error.
#include "fuzz_util.h"
#include "io/document_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  zaya::ReadOptions options;
  options.format = data[0] % 3 == 0   ? zaya::InputFormat::kJsonl
                   : data[0] % 3 == 1 ? zaya::InputFormat::kText
                                      : zaya::InputFormat::kAuto;
  options.id_key = data[0] & 8 ? "id" : "";
  options.max_record_bytes = 4096;
  const std::string path = zaya::fuzz::write_input("records.jsonl", data + 1, size - 1);
  ZAYA_FUZZ_EXPECT_ERRORS({
    zaya::RecordReader reader(path, options);
    zaya::Record record;
    zaya::Document doc;
    while (reader.next(record)) {
      const zaya::RecordVerdict v = zaya::to_document(record, reader.format(), options, path, doc);
      if (!v.ok() && v.message.find(path) == std::string::npos) abort();  // FILE:LINE named
    }
  });
  return 0;
}
