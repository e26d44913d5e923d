// tessera's Python module (`tessera._tessera`, issue 20; docs/python.md): tensors that speak
// DLPack both ways (zero-copy with NumPy and PyTorch), calls of any registered operator by name
// with Python, NumPy or PyTorch arguments, libraries of C++ operators loaded at run time, the
// graph compiler over an operator, and tessera's errors as Python exceptions with the same
// messages.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>

#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/compile.h"
#include "tessera/dispatch.h"
#include "tessera/dlpack.h"
#include "tessera/tessera.h"
#include "tessera/version.h"

namespace nb = nanobind;
using namespace tessera;

namespace {

// ---- errors ---------------------------------------------------------------------------------

// The Python class of each tessera error kind: tessera.Error and, for each kind, a subclass of it
// and of the nearest built-in exception (tessera.ShapeError is a ValueError, ...), so Python code
// catches either.
std::map<std::string, PyObject*>& error_classes() {
  static auto* m = new std::map<std::string, PyObject*>();
  return *m;
}

void define_errors(nb::module_& m) {
  auto make = [&](const char* name, PyObject* bases) {
    const std::string qual = std::string("tessera.") + name;
    PyObject* cls = PyErr_NewException(qual.c_str(), bases, nullptr);
    Py_DECREF(bases);
    if (!cls) throw nb::python_error();
    error_classes()[name] = cls;
    m.attr(name) = nb::borrow(cls);
    return cls;
  };
  PyObject* base = make("Error", Py_BuildValue("(O)", PyExc_Exception));
  const std::pair<const char*, PyObject*> kinds[] = {
      {"ValueError", PyExc_ValueError},         {"TypeError", PyExc_TypeError},
      {"IndexError", PyExc_IndexError},         {"ShapeError", PyExc_ValueError},
      {"DTypeError", PyExc_TypeError},          {"DeviceError", PyExc_RuntimeError},
      {"CompileError", PyExc_RuntimeError},     {"NotImplementedError", PyExc_NotImplementedError},
      {"RuntimeError", PyExc_RuntimeError},     {"InternalError", PyExc_RuntimeError},
      {"AssertionError", PyExc_AssertionError},
  };
  for (const auto& [name, builtin] : kinds) make(name, Py_BuildValue("(OO)", base, builtin));
  make("DataError", Py_BuildValue("(O)", error_classes()["ValueError"]));
  make("OutOfMemoryError",
       Py_BuildValue("(OO)", error_classes()["RuntimeError"], PyExc_MemoryError));
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      auto it = error_classes().find(e.kind());
      PyErr_SetString(it != error_classes().end() ? it->second : error_classes()["Error"],
                      e.what());
    }
  });
}

// ---- DLPack -----------------------------------------------------------------------------------

// A capsule the consumer did not take still owns its tensor: free it then.
void versioned_capsule_destructor(PyObject* c) {
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    if (m && m->deleter) m->deleter(m);
  }
}
void legacy_capsule_destructor(PyObject* c) {
  if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}

// `t.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None)` (the Python array API
// protocol): a versioned capsule when the consumer accepts version 1, else the legacy one.
nb::object export_dlpack(const Tensor& t, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy) {
  if (!copy.is_none() && nb::cast<bool>(copy)) {
    throw nb::buffer_error("tessera: __dlpack__(copy=True) is not supported; copy with .clone()");
  }
  if (!dl_device.is_none()) {
    const auto d = nb::cast<std::pair<int, int>>(dl_device);
    const bool cuda = t.device().is_cuda();
    if (d.first != (cuda ? kDLCUDA : kDLCPU) || d.second != (cuda ? t.device().index() : 0))
      throw nb::buffer_error("tessera: __dlpack__ to another device is not supported");
  }
  DLPackExportOptions o;
  if (!stream.is_none()) {
    const int64_t s = nb::cast<int64_t>(stream);
    if (s != -1) o.consumer_stream = reinterpret_cast<void*>(static_cast<intptr_t>(s));
  }
  bool versioned = false;
  if (!max_version.is_none()) {
    const auto v = nb::cast<std::pair<int, int>>(max_version);
    versioned = v.first >= 1;
  }
  PyObject* cap;
  if (versioned) {
    DLManagedTensorVersioned* m = to_dlpack_versioned(t, o);
    cap = PyCapsule_New(m, "dltensor_versioned", versioned_capsule_destructor);
    if (!cap) m->deleter(m);
  } else {
    DLManagedTensor* m = to_dlpack(t, o);
    cap = PyCapsule_New(m, "dltensor", legacy_capsule_destructor);
    if (!cap) m->deleter(m);
  }
  if (!cap) throw nb::python_error();
  return nb::steal(cap);
}

// Takes the memory of anything with `__dlpack__` (a NumPy array, a PyTorch tensor, a tessera
// tensor): no copy; the producer's deleter runs when the last tessera tensor viewing it is gone.
Tensor import_dlpack(nb::handle obj) {
  if (!nb::hasattr(obj, "__dlpack__")) {
    throw nb::type_error(("tessera.from_dlpack: a " +
                          std::string(nb::type_name(obj.type()).c_str()) +
                          " has no __dlpack__ (a NumPy array, a PyTorch tensor, ...)")
                             .c_str());
  }
  nb::object cap;
  try {
    cap = obj.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 1));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = obj.attr("__dlpack__")();  // a producer from before max_version
  }
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    PyCapsule_SetName(c, "used_dltensor_versioned");  // ours now, even if the import throws
    nb::gil_scoped_release release;
    return from_dlpack(m);
  }
  if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    PyCapsule_SetName(c, "used_dltensor");
    nb::gil_scoped_release release;
    return from_dlpack(m);
  }
  throw nb::type_error("tessera.from_dlpack: __dlpack__ did not return a DLPack capsule");
}

// Runs `f` with the GIL released (kernels and compiles take long; other Python threads run), and
// rethrows what it threw once the GIL is held again: no exception unwinds across the release.
template <class F>
void run_without_gil(F&& f) {
  std::exception_ptr error;
  {
    nb::gil_scoped_release release;
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// ---- Python values <-> IValues by an operator's schema ----------------------------------------

// Each conversion gives nullopt for a value that does not fit the type (the caller tries another
// overload): no exceptions for control flow.
std::optional<Tensor> to_tensor(nb::handle v) {
  if (nb::isinstance<Tensor>(v)) return nb::cast<Tensor>(v);
  if (nb::hasattr(v, "__dlpack__") && !nb::isinstance<nb::int_>(v) &&
      !nb::isinstance<nb::float_>(v) && !nb::isinstance<nb::bool_>(v))
    return import_dlpack(v);
  return std::nullopt;
}

bool is_sequence(nb::handle v) {
  return nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v);
}

std::optional<int64_t> to_int(nb::handle v) {
  if (nb::isinstance<nb::bool_>(v) || !nb::isinstance<nb::int_>(v)) return std::nullopt;
  return nb::cast<int64_t>(v);
}
std::optional<double> to_float(nb::handle v) {
  if (nb::isinstance<nb::bool_>(v)) return std::nullopt;
  if (nb::isinstance<nb::int_>(v)) return static_cast<double>(nb::cast<int64_t>(v));
  if (nb::isinstance<nb::float_>(v)) return nb::cast<double>(v);
  return std::nullopt;
}
std::optional<bool> to_bool(nb::handle v) {
  if (!nb::isinstance<nb::bool_>(v)) return std::nullopt;
  return nb::cast<bool>(v);
}
// A dtype as tessera names it ("float32"), or PyTorch's / NumPy's dtype objects.
std::optional<DType> to_dtype(nb::handle v) {
  std::string s = nb::cast<std::string>(nb::str(v));
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  return parse_dtype(s);
}

// Every element of a sequence converted, or nullopt.
template <class T, class F>
std::optional<std::vector<T>> each(nb::handle seq, F&& convert) {
  std::vector<T> out;
  for (nb::handle e : nb::borrow<nb::sequence>(seq)) {
    auto x = convert(e);
    if (!x) return std::nullopt;
    out.push_back(T(*x));
  }
  return out;
}

template <class T>
std::optional<IValue> boxed(std::optional<T> v) {
  if (!v) return std::nullopt;
  return IValue(std::move(*v));
}

std::optional<IValue> to_ivalue(nb::handle v, const SchemaType& t) {
  if (v.is_none()) return t.optional ? std::optional<IValue>(IValue()) : std::nullopt;
  if (t.list && !is_sequence(v)) {
    const auto n = static_cast<size_t>(t.list_size);
    auto i = to_int(v);  // `int[2] stride=1` takes one int
    if (t.list_size <= 0 || !i) return std::nullopt;
    if (t.kind == TypeKind::Int) return IValue(std::vector<int64_t>(n, *i));
    if (t.kind == TypeKind::SymInt) return IValue(std::vector<SymInt>(n, SymInt(*i)));
    return std::nullopt;
  }
  if (t.list) {
    switch (t.kind) {
      case TypeKind::Tensor:
        if (t.element_optional) {
          return boxed(each<std::optional<Tensor>>(v, [](nb::handle e) {
            return e.is_none() ? std::optional<std::optional<Tensor>>(std::optional<Tensor>())
                               : std::optional<std::optional<Tensor>>(to_tensor(e));
          }));
        }
        return boxed(each<Tensor>(v, to_tensor));
      case TypeKind::Int:
        return boxed(each<int64_t>(v, to_int));
      case TypeKind::SymInt:
        return boxed(each<SymInt>(v, to_int));
      case TypeKind::Float:
        return boxed(each<double>(v, to_float));
      case TypeKind::Bool:
        return boxed(each<bool>(v, to_bool));
      default:
        return std::nullopt;
    }
  }
  switch (t.kind) {
    case TypeKind::Tensor:
      return boxed(to_tensor(v));
    case TypeKind::Int:
    case TypeKind::SymInt:
      return boxed(to_int(v));
    case TypeKind::Float:
      return boxed(to_float(v));
    case TypeKind::Bool:
      return boxed(to_bool(v));
    case TypeKind::Scalar:
      if (nb::isinstance<nb::bool_>(v)) return IValue(nb::cast<bool>(v));
      if (nb::isinstance<nb::int_>(v)) return IValue(nb::cast<int64_t>(v));
      return boxed(to_float(v));
    case TypeKind::ScalarType:
      return boxed(to_dtype(v));
    case TypeKind::Device:
      if (!nb::isinstance<nb::str>(v) && !nb::hasattr(v, "type")) return std::nullopt;
      return IValue(Device(nb::cast<std::string>(nb::str(v))));
    case TypeKind::Str:
      if (!nb::isinstance<nb::str>(v)) return std::nullopt;
      return IValue(nb::cast<std::string>(v));
  }
  return std::nullopt;
}

// The arguments of a call as the schema's stack: positional, then by keyword, then defaults.
// nullopt when they do not fit this overload; `why` says how.
std::optional<Stack> stack_for(const FunctionSchema& s, const nb::args& args,
                               const nb::kwargs& kwargs, std::string* why) {
  const auto& params = s.arguments();
  if (args.size() > params.size()) {
    *why =
        "takes " + std::to_string(params.size()) + " arguments, got " + std::to_string(args.size());
    return std::nullopt;
  }
  Stack stack;
  size_t used_kwargs = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Argument& a = params[i];
    nb::handle v;
    if (i < args.size()) {
      if (a.kwarg_only) {
        *why = "'" + a.name + "' is keyword-only";
        return std::nullopt;
      }
      v = args[i];
    } else if (kwargs.contains(a.name.c_str())) {
      v = kwargs[a.name.c_str()];
      ++used_kwargs;
    } else if (a.default_value) {
      stack.push_back(*a.default_value);
      continue;
    } else {
      *why = "missing argument '" + a.name + "'";
      return std::nullopt;
    }
    std::optional<IValue> x = to_ivalue(v, a.type);
    if (!x) {
      *why = "'" + a.name + "' must be " + a.type.str() + ", got " +
             std::string(nb::type_name(v.type()).c_str());
      return std::nullopt;
    }
    stack.push_back(std::move(*x));
  }
  if (used_kwargs != kwargs.size()) {
    *why = "an unknown keyword argument";
    return std::nullopt;
  }
  return stack;
}

nb::object to_python(const IValue& v) {
  if (v.is_none()) return nb::none();
  if (v.is_tensor()) return nb::cast(v.to_tensor());
  if (v.is_bool()) return nb::cast(v.to_bool());
  if (v.is_intlike()) return nb::cast(v.to_int());
  if (v.is_double()) return nb::cast(v.to_double());
  if (v.is_string()) return nb::cast(v.to_string());
  if (v.is_dtype()) return nb::cast(std::string(dtype_name(v.to_dtype())));
  if (v.is_device()) return nb::cast(v.to_device().str());
  if (v.is_tensor_list()) return nb::cast(v.to_tensor_list());
  if (v.is_int_list()) return nb::cast(v.to_int_list());
  if (v.is_double_list()) return nb::cast(v.to_double_list());
  if (v.is_tuple()) {
    nb::list out;
    for (const IValue& e : v.to_tuple()) out.append(to_python(e));
    return nb::tuple(out);
  }
  throw nb::type_error("tessera: a result of a type Python cannot take");
}

// The overloads a name means: "ns::op.overload" exactly, or every overload of "ns::op".
std::vector<OperatorHandle> candidates(const std::string& name) {
  std::vector<OperatorHandle> all;
  if (auto op = find_op(name)) all.push_back(*op);  // the default overload first
  if (name.find('.') == std::string::npos) {
    for (const OperatorHandle& o : overloads(name))
      if (all.empty() || !(o == all[0])) all.push_back(o);
  }
  if (all.empty()) (void)get_op(name);  // a ValueError naming close matches
  return all;
}

nb::object call(const std::string& name, nb::args args, nb::kwargs kwargs) {
  std::string reasons;
  for (const OperatorHandle& op : candidates(name)) {
    std::string why;
    std::optional<Stack> stack = stack_for(op.schema(), args, kwargs, &why);
    if (!stack) {
      reasons += "\n  " + op.schema().str() + ": " + why;
      continue;
    }
    run_without_gil([&] { op.call(*stack); });
    if (stack->empty()) return nb::none();
    if (stack->size() == 1) return to_python((*stack)[0]);
    nb::list out;
    for (const IValue& v : *stack) out.append(to_python(v));
    return nb::tuple(out);
  }
  throw nb::type_error(
      ("tessera: no overload of " + name + " takes these arguments:" + reasons).c_str());
}

// ---- the graph compiler over one operator ------------------------------------------------------

// `tessera.compile("ns::op")`: the operator's tensor arguments in, its tensors out, through
// tessera::compile (guards, recompiles, fusion around user kernels).
class CompiledOp {
 public:
  CompiledOp(const std::string& name, bool fullgraph) : op_(get_op(name)) {
    for (const Argument& a : op_.schema().arguments()) {
      if (a.type.kind != TypeKind::Tensor || a.type.list) break;
      ++tensors_;
    }
    if (tensors_ == 0) {
      TS_ERROR(ValueError) << "tessera.compile: " << name
                           << " takes no tensor as its first argument";
    }
    CompileOptions o;
    o.fullgraph = fullgraph;
    o.name = name;
    const OperatorHandle op = op_;
    fn_.emplace(compile(
        [op](const std::vector<Tensor>& xs) {
          Stack s;
          const auto& params = op.schema().arguments();
          for (size_t i = 0; i < params.size(); ++i) {
            if (i < xs.size()) {
              s.push_back(xs[i]);
            } else if (params[i].default_value) {
              s.push_back(*params[i].default_value);
            } else {
              TS_ERROR(TypeError) << op.name() << ": missing argument '" << params[i].name << "'";
            }
          }
          op.call(s);
          std::vector<Tensor> out;
          for (const IValue& v : s) {
            if (v.is_tensor()) out.push_back(v.to_tensor());
          }
          return out;
        },
        o));
  }

  nb::object operator()(nb::args args) {
    if (args.size() != tensors_) {
      throw nb::type_error(("tessera: the compiled " + op_.name() + " takes " +
                            std::to_string(tensors_) + " tensors, got " +
                            std::to_string(args.size()))
                               .c_str());
    }
    std::vector<Tensor> xs;
    for (nb::handle a : args) {
      std::optional<Tensor> t = to_tensor(a);
      if (!t) throw nb::type_error("tessera: a compiled operator takes tensors");
      xs.push_back(std::move(*t));
    }
    std::vector<Tensor> out;
    run_without_gil([&] { out = (*fn_)(xs); });
    if (out.size() == 1) return nb::cast(out[0]);
    return nb::cast(out);
  }

  std::string graph() const { return fn_->stats().last_graph; }
  int64_t graphs() const { return fn_->stats().graphs; }

  // The newest graph as plain Python data (CompiledGraph's fields).
  nb::dict graph_data() const {
    const CompiledGraph g = fn_->graph();
    auto ids = [](const std::vector<int>& v) {
      nb::list l;
      for (int i : v) l.append(i);
      return l;
    };
    auto strs = [](const std::vector<std::string>& v) {
      nb::list l;
      for (const auto& x : v) l.append(x);
      return l;
    };
    auto where = [](const SourceLoc& loc) {
      std::ostringstream os;
      if (loc.known()) os << loc;
      return os.str();
    };
    static const char* const kinds[] = {"op", "extern", "kernel"};
    nb::list values, nodes;
    for (const auto& v : g.values) {
      nb::dict d;
      d["id"] = v.id;
      d["is_tensor"] = v.is_tensor;
      if (v.is_tensor) {
        d["dtype"] = std::string(dtype_name(v.dtype));
        d["sizes"] = strs(v.sizes);
        d["strides"] = strs(v.strides);
        d["storage"] = v.storage;
      } else {
        d["expr"] = v.expr;
      }
      d["producer"] = v.producer;
      values.append(d);
    }
    for (const auto& n : g.nodes) {
      nb::dict d;
      d["kind"] = kinds[static_cast<int>(n.kind)];
      d["target"] = n.target;
      d["inputs"] = ids(n.inputs);
      d["reads"] = ids(n.reads);
      d["writes"] = ids(n.writes);
      d["outputs"] = ids(n.outputs);
      nb::list fused;
      for (const auto& f : n.fused_from) fused.append(nb::make_tuple(f.op, where(f.loc)));
      d["fused_from"] = fused;
      d["grid"] = strs(n.grid);
      d["variants"] = n.variants;
      d["elided_when"] = n.elided_when;
      d["arena"] = n.arena;
      d["arena_offset"] = n.arena_offset;
      d["planned_from"] = n.planned_from;
      d["loc"] = where(n.loc);
      d["note"] = n.note;
      nodes.append(d);
    }
    nb::dict d;
    d["name"] = g.name;
    d["values"] = values;
    d["nodes"] = nodes;
    d["inputs"] = ids(g.inputs);
    d["outputs"] = ids(g.outputs);
    d["guards"] = strs(g.guards);
    nb::list arenas;
    for (const auto& a : g.arenas) {
      nb::dict ad;
      ad["device"] = a.device.str();
      ad["bytes"] = a.bytes;
      ad["unplanned_bytes"] = a.unplanned_bytes;
      ad["values"] = a.values;
      arenas.append(ad);
    }
    d["arenas"] = arenas;
    return d;
  }

 private:
  OperatorHandle op_;
  size_t tensors_ = 0;
  static std::vector<Tensor> signature(const std::vector<Tensor>&);
  using Fn = decltype(compile(&CompiledOp::signature));
  std::optional<Fn> fn_;
};

// Loads a shared library whose static initializers register operators (TESSERA_LIBRARY, triton_op,
// custom_op), into this process's one registry.
void load_library(const std::string& path) {
  if (!::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* err = ::dlerror();
    TS_ERROR(RuntimeError) << "tessera.load_library: cannot load " << path << ": "
                           << (err ? err : "unknown error");
  }
}

}  // namespace

NB_MODULE(_tessera, m) {
  m.doc() = "tessera: tile kernels and a graph compiler, from C++ (docs/python.md)";
  m.attr("__version__") = tessera::version();
  define_errors(m);

  nb::class_<Tensor>(m, "Tensor")
      .def_prop_ro("shape",
                   [](const Tensor& t) {
                     nb::list out;
                     for (const SymInt& s : t.sizes()) out.append(s.guard_int());
                     return nb::tuple(out);
                   })
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_prop_ro("device", [](const Tensor& t) { return t.device().str(); })
      .def_prop_ro("ndim", &Tensor::dim)
      .def("numel", [](const Tensor& t) { return t.numel().guard_int(); })
      .def("item",
           [](const Tensor& t) -> nb::object {
             const Scalar s = t.item();
             if (s.is_bool()) return nb::cast(s.to_bool());
             if (s.is_integral()) return nb::cast(s.to_int());
             return nb::cast(s.to_double());
           })
      .def("cpu", [](const Tensor& t) { return t.cpu(); })
      .def("to", [](const Tensor& t, const std::string& device) { return t.to(Device(device)); })
      .def("contiguous", [](const Tensor& t) { return t.contiguous(); })
      .def("clone", [](const Tensor& t) { return t.clone(); })
      .def("__repr__", [](const Tensor& t) { return t.str(); })
      .def("__dlpack__", &export_dlpack, nb::kw_only(), nb::arg("stream") = nb::none(),
           nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
           nb::arg("copy") = nb::none())
      .def("__dlpack_device__", [](const Tensor& t) {
        return t.device().is_cuda() ? nb::make_tuple(int(kDLCUDA), t.device().index())
                                    : nb::make_tuple(int(kDLCPU), 0);
      });

  m.def("from_dlpack", &import_dlpack, nb::arg("x"),
        "A tensor viewing the memory of anything with __dlpack__ (NumPy, PyTorch), no copy.");
  m.def("call", &call,
        "Calls a registered operator ('aten::add', 'mylib::op.overload') with Python values.");
  m.def("load_library", &load_library, nb::arg("path"));
  m.def("operators", [] {
    std::vector<std::string> names;
    for (const OperatorHandle& op : all_ops()) names.push_back(op.name());
    return names;
  });
  m.def("schema", [](const std::string& name) { return get_op(name).schema().str(); });
  nb::class_<CompiledOp>(m, "CompiledOp")
      .def("__call__", &CompiledOp::operator())
      .def_prop_ro("graph", &CompiledOp::graph)
      .def_prop_ro("graphs", &CompiledOp::graphs)
      .def("graph_data", &CompiledOp::graph_data);
  m.def(
      "compile",
      [](const std::string& name, bool fullgraph) { return new CompiledOp(name, fullgraph); },
      nb::arg("op"), nb::arg("fullgraph") = false, nb::rv_policy::take_ownership);
}
