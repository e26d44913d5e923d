// AOT packages (issue 18): the container and the model a loader reads from an untrusted file. The
// first byte picks the mode: odd, the bytes are a whole package file (header, section table,
// digests); even, they are a u32 length, a manifest and a schedule, wrapped here in a container
// with correct digests, so that mutations reach the model's decoder. An accepted model must
// round-trip, and its size program must rebuild and run without undefined behaviour. No code
// from the input is ever loaded.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "aot/package.h"
#include "compile/sym.h"
#include "fuzz.h"

using namespace tessera;
namespace ad = tessera::aot_detail;

static void check_model(const ad::Container& c) {
  ad::Model m;
  if (!fuzz::accepts("aot", [&] { m = ad::decode(c, "input"); })) return;
  std::vector<compiler::sym::Program::RawInstr> code(m.prog_op.size());
  for (size_t i = 0; i < code.size(); ++i)
    code[i] = {m.prog_op[i], m.prog_a[i], m.prog_b[i], m.prog_imm[i]};
  std::vector<compiler::sym::Program> prog;
  if (fuzz::accepts("aot", [&] {
        prog.push_back(compiler::sym::Program::from_raw(code, m.prog_outputs, m.symbols.size()));
      })) {
    std::vector<int64_t> symbols, out(prog[0].num_outputs());
    for (const auto& s : m.symbols) symbols.push_back(s.example);
    prog[0].run(symbols.data(), out.data());  // overflow and division by zero are refused
  }
  const std::string man = ad::encode_manifest(m), sched = ad::encode_schedule(m);
  std::vector<std::pair<ad::SectionId, std::string>> sections = {{ad::SectionId::Manifest, man},
                                                                 {ad::SectionId::Schedule, sched}};
  const std::string_view consts = c.section(ad::SectionId::Constants);
  if (!consts.empty()) sections.emplace_back(ad::SectionId::Constants, std::string(consts));
  const std::string cuda = m.cuda ? ad::encode_cuda(m.cuda_code) : std::string();
  if (m.cuda) sections.emplace_back(ad::SectionId::CudaObjects, cuda);
  ad::Model again;
  fuzz::must("aot", "decode of encode", [&] {
    again = ad::decode(ad::read_container(ad::write_container(sections), "again"), "again");
  });
  if (ad::encode_manifest(again) != man || ad::encode_schedule(again) != sched ||
      again.cuda != m.cuda || (m.cuda && ad::encode_cuda(again.cuda_code) != cuda))
    fuzz::finding("aot", "model round trip");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    ad::Container c;
    if (fuzz::accepts("aot", [&] { c = ad::read_container(bytes, "input"); })) check_model(c);
    return 0;
  }
  if (bytes.size() < 4) return 0;
  uint32_t n;
  std::memcpy(&n, bytes.data(), 4);
  if (n > bytes.size() - 4) return 0;
  const std::string manifest = bytes.substr(4, n), schedule = bytes.substr(4 + n);
  ad::Container c;
  fuzz::must("aot", "read_container of a written container", [&] {
    c = ad::read_container(ad::write_container({{ad::SectionId::Manifest, manifest},
                                                {ad::SectionId::Schedule, schedule}}),
                           "input");
  });
  check_model(c);
  return 0;
}
