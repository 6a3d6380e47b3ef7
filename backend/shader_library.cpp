// torch.metalx.compile_shader in C++ (see shader_library.h; the user-facing Python
// wrapper and its documentation are python/metalx/shaders.py).
//
// A library is compiled through the default stream's PipelineCache, so compiling the
// same source again (another compile_shader call, another device) is a cache hit, and
// the cache's bound applies. The library object keeps its own reference per device:
// a kernel the user holds must not recompile because unrelated shaders evicted it.
// Calls are encoded on the tensors' device's default stream like every built-in
// kernel, so they are ordered with all other metalx work on it.
#include "shader_library.h"

#include "python_errors.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "allocator.h"
#include "core/stream_pool.h"
#include "device.h"

namespace metalx {
namespace {

namespace py = pybind11;

PyObject* g_compile_error = nullptr;  // metalx._C.ShaderCompileError (a RuntimeError)

// Raises the Python exception `type`. Needs the GIL.
[[noreturn]] void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

std::string argName(size_t i) { return "argument " + std::to_string(i); }

rt::LibraryPtr compileOn(c10::DeviceIndex device, const std::string& source,
                         const rt::CompileOptions& options) {
  checkDeviceIndex(device);
  try {
    py::gil_scoped_release no_gil;  // the simulator runs the host compiler: let threads run
    return devicePipelines(device).compile(source, options);
  } catch (const rt::Error& e) {
    // A distinct type so callers can tell bad source from a broken runtime.
    if (e.kind() == rt::ErrorKind::Compile) raise(g_compile_error, e.what());
    throw;
  }
}

// Bytes with a type name: what metalx.shaders.Int32(5) & co. make in Python, bound
// with setBytes exactly as given.
struct ShaderValue {
  std::string bytes;
  std::string type_name;
};

class ShaderLibrary {
 public:
  ShaderLibrary(std::string source, std::string name, std::vector<std::string> include_dirs)
      : source_(std::move(source)) {
    options_.source_name = std::move(name);
    options_.include_dirs = std::move(include_dirs);
    home_ = currentDevice();
    rt::LibraryPtr library = compileOn(home_, source_, options_);
    libraries_[home_] = library;
    names_ = library->functionNames();
    std::sort(names_.begin(), names_.end());
  }

  const std::vector<std::string>& kernelNames() const { return names_; }
  const std::string& sourceName() const { return options_.source_name; }
  c10::DeviceIndex home() const { return home_; }

  bool has(const std::string& name) const {
    return std::binary_search(names_.begin(), names_.end(), name);
  }

  // The library compiled for `device` (a cache hit after the first call there).
  rt::LibraryPtr on(c10::DeviceIndex device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = libraries_.find(device); it != libraries_.end()) return it->second;
    }
    rt::LibraryPtr library = compileOn(device, source_, options_);  // not under the lock
    std::lock_guard<std::mutex> lock(mutex_);
    return libraries_.emplace(device, library).first->second;
  }

 private:
  std::string source_;
  rt::CompileOptions options_;
  c10::DeviceIndex home_;  // the device compiled on creation (its diagnostics, its names)
  std::vector<std::string> names_;
  std::mutex mutex_;       // calls may come from several Python threads
  std::map<c10::DeviceIndex, rt::LibraryPtr> libraries_;
};

// ---- argument conversion (all with the GIL held) ----

int64_t toInt64(py::handle obj, const std::string& what) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  if (overflow)
    raise(PyExc_OverflowError, what + ": " + py::str(obj).cast<std::string>() +
                                   " does not fit in int64 (pass metalx.shaders.UInt64(...) "
                                   "for values up to 2**64 - 1)");
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

bool isInt(py::handle obj) { return PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr()); }

template <class T>
void append(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// A list/tuple as an inline array: all bools -> bool, all ints -> int64, ints and
// floats -> float32 (as a scalar of each would bind).
std::string arrayBytes(py::sequence seq, size_t i) {
  if (seq.size() == 0)
    raise(PyExc_ValueError, argName(i) + " is an empty list; Metal cannot bind zero bytes");
  bool all_bool = true, any_float = false;
  for (size_t k = 0; k < seq.size(); ++k) {
    py::handle e = seq[k];
    if (PyFloat_Check(e.ptr())) any_float = true;
    else if (!PyLong_Check(e.ptr()))
      raise(PyExc_TypeError, argName(i) + ": element " + std::to_string(k) + " has type " +
                                 Py_TYPE(e.ptr())->tp_name +
                                 "; lists bind as arrays of int, float or bool (use "
                                 "metalx.shaders.Int32([...]) & co. for other element types)");
    if (!PyBool_Check(e.ptr())) all_bool = false;
  }
  std::string bytes;
  for (size_t k = 0; k < seq.size(); ++k) {
    py::handle e = seq[k];
    if (all_bool) append<uint8_t>(bytes, e.ptr() == Py_True);
    else if (any_float) append<float>(bytes, static_cast<float>(PyFloat_AsDouble(e.ptr())));
    else append<int64_t>(bytes, toInt64(e, argName(i) + " element " + std::to_string(k)));
  }
  return bytes;
}

// A non-tensor argument as the bytes setBytes binds.
std::string scalarBytes(py::handle obj, size_t i) {
  std::string bytes;
  if (py::isinstance<ShaderValue>(obj)) {
    bytes = obj.cast<const ShaderValue&>().bytes;
  } else if (PyBool_Check(obj.ptr())) {
    append<uint8_t>(bytes, obj.ptr() == Py_True);  // MSL bool is one byte
  } else if (PyLong_Check(obj.ptr())) {
    append<int64_t>(bytes, toInt64(obj, argName(i)));
  } else if (PyFloat_Check(obj.ptr())) {
    append<float>(bytes, static_cast<float>(PyFloat_AsDouble(obj.ptr())));  // no double on GPUs
  } else if (PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr())) {
    bytes = arrayBytes(py::reinterpret_borrow<py::sequence>(obj), i);
  } else {
    raise(PyExc_TypeError,
          argName(i) + " has type " + Py_TYPE(obj.ptr())->tp_name +
              "; kernels take metalx tensors, int (int64), float (float32), bool, a list/tuple "
              "of numbers, or a metalx.shaders value such as Int32(5) or Float16(0.5)");
  }
  if (bytes.empty())
    raise(PyExc_ValueError, argName(i) + " is empty; Metal cannot bind zero bytes");
  if (bytes.size() > rt::kMaxInlineBytes)
    raise(PyExc_ValueError, argName(i) + " is " + std::to_string(bytes.size()) +
                                " bytes; Metal binds at most 4096 bytes inline: pass a metalx "
                                "tensor for larger data");
  return bytes;
}

// An int or a tuple of 1-3 ints (each >= `min`), as a 3-D extent padded with 1s.
rt::Size3 parseExtent(py::handle obj, const char* what, int64_t min) {
  std::vector<uint64_t> dims;
  auto one = [&](py::handle e) {
    if (!isInt(e))
      raise(PyExc_TypeError, std::string(what) + " must be an int or a tuple of 1-3 ints, got " +
                                 Py_TYPE(e.ptr())->tp_name);
    int64_t v = toInt64(e, what);
    if (v < min)
      raise(PyExc_ValueError, std::string(what) + " must be >= " + std::to_string(min) + ", got " +
                                  std::to_string(v));
    dims.push_back(static_cast<uint64_t>(v));
  };
  if (PyTuple_Check(obj.ptr()) || PyList_Check(obj.ptr())) {
    auto seq = py::reinterpret_borrow<py::sequence>(obj);
    if (seq.size() < 1 || seq.size() > 3)
      raise(PyExc_ValueError, std::string(what) + " must have 1 to 3 dimensions, got " +
                                  std::to_string(seq.size()));
    for (size_t k = 0; k < seq.size(); ++k) one(seq[k]);
  } else {
    one(obj);
  }
  dims.resize(3, 1);
  return {dims[0], dims[1], dims[2]};
}

// Fills x first, then y, then z, up to `limit` threads in all.
rt::Size3 defaultGroup(rt::Size3 grid, uint64_t limit) {
  auto clip = [](uint64_t n, uint64_t cap) { return std::max<uint64_t>(1, std::min(n, cap)); };
  rt::Size3 g;
  g.width = clip(grid.width, limit);
  g.height = clip(grid.height, limit / g.width);
  g.depth = clip(grid.depth, limit / (g.width * g.height));
  return g;
}

class ShaderKernel {
 public:
  ShaderKernel(std::shared_ptr<ShaderLibrary> library, std::string name)
      : library_(std::move(library)), name_(std::move(name)) {
    if (!library_->has(name_)) {
      std::string known;
      for (auto& n : library_->kernelNames()) known += (known.empty() ? "" : ", ") + n;
      throw py::attribute_error(library_->sourceName() + " has no kernel '" + name_ +
                                "'; its kernels: " + (known.empty() ? "none" : known));
    }
  }

  const std::string& name() const { return name_; }
  c10::DeviceIndex home() const { return library_->home(); }

  rt::ComputePipelinePtr pipeline(c10::DeviceIndex device) {
    rt::LibraryPtr library = library_->on(device);
    py::gil_scoped_release no_gil;
    return devicePipelines(device).get(library, name_, constants_);
  }

  // This kernel with function constant values (a pipeline per value set, cached).
  ShaderKernel specialized(rt::FunctionConstantValues constants) const {
    ShaderKernel k = *this;
    k.constants_ = std::move(constants);
    return k;
  }
  const rt::FunctionConstantValues& constants() const { return constants_; }

  void call(py::args args, py::kwargs kwargs);

 private:
  void checkArgumentCount(const rt::ComputePipelinePtr& pipe, size_t given) const;

  std::shared_ptr<ShaderLibrary> library_;
  std::string name_;
  rt::FunctionConstantValues constants_;
};

// A Python value as a function constant: a metalx.shaders exact-type value keeps its
// type; bool -> bool, int -> int, float -> float.
rt::FunctionConstantValue constantValue(py::handle obj, const std::string& what) {
  using T = rt::FunctionConstantValue::Type;
  rt::FunctionConstantValue v;
  if (py::isinstance<ShaderValue>(obj)) {
    const ShaderValue& sv = obj.cast<const ShaderValue&>();
    static const std::map<std::string, T> types = {
        {"bool", T::Bool}, {"char", T::Char},     {"uchar", T::UChar}, {"short", T::Short},
        {"ushort", T::UShort}, {"int", T::Int},   {"uint", T::UInt},   {"long", T::Long},
        {"ulong", T::ULong}, {"half", T::Half},   {"bfloat", T::BFloat}, {"float", T::Float}};
    auto it = types.find(sv.type_name);
    if (it == types.end() || sv.bytes.size() != rt::functionConstantTypeSize(it->second))
      raise(PyExc_TypeError, what + ": a function constant takes one value, got " + sv.type_name + " of " +
                                 std::to_string(sv.bytes.size()) + " bytes");
    v.type = it->second;
    v.bytes = sv.bytes;
  } else if (PyBool_Check(obj.ptr())) {
    v.type = T::Bool;
    append<uint8_t>(v.bytes, obj.ptr() == Py_True);
  } else if (isInt(obj)) {
    int64_t x = toInt64(obj, what);
    if (x < INT32_MIN || x > INT32_MAX)
      raise(PyExc_OverflowError, what + ": " + std::to_string(x) +
                                     " does not fit in int (pass metalx.shaders.Int64(...) for a long constant)");
    v.type = T::Int;
    append<int32_t>(v.bytes, static_cast<int32_t>(x));
  } else if (PyFloat_Check(obj.ptr())) {
    v.type = T::Float;
    append<float>(v.bytes, static_cast<float>(PyFloat_AsDouble(obj.ptr())));
  } else {
    raise(PyExc_TypeError, what + " has type " + Py_TYPE(obj.ptr())->tp_name +
                               "; function constants take bool, int (int), float (float) or a metalx.shaders "
                               "value such as UInt32(3) or Float16(0.5)");
  }
  return v;
}

struct Binding {
  rt::BufferPtr buffer;  // a tensor's buffer, or null for inline bytes
  size_t offset = 0;
  std::string bytes;
  bool empty_tensor = false;  // numel 0: no memory to bind
};

// Arguments bind by position to [[buffer(0)]], [[buffer(1)]], ...: there must be one
// for every index up to the highest the kernel declares. Checked here, because
// bindings persist in the stream's open encoder: a missing argument would otherwise
// silently read what an earlier kernel bound at its index.
void ShaderKernel::checkArgumentCount(const rt::ComputePipelinePtr& pipe, size_t given) const {
  std::string declared;
  size_t expected = 0;
  for (const rt::KernelArgument& a : pipe->arguments()) {
    if (a.kind != rt::KernelArgument::Kind::Buffer) continue;
    expected = std::max<size_t>(expected, a.index + 1);
    declared += (declared.empty() ? "" : ", ") + a.name + " [[buffer(" + std::to_string(a.index) + ")]]";
  }
  if (given != expected)
    raise(PyExc_TypeError, name_ + "() takes " + std::to_string(expected) + " argument" +
                               (expected == 1 ? "" : "s") + " (" + declared + "), got " + std::to_string(given));
}

void ShaderKernel::call(py::args args, py::kwargs kwargs) {
  py::object threads = py::none(), group_size = py::none(), tg_memory = py::none();
  for (auto [key, value] : kwargs) {
    std::string k = py::str(key);
    if (k == "threads") threads = py::reinterpret_borrow<py::object>(value);
    else if (k == "group_size") group_size = py::reinterpret_borrow<py::object>(value);
    else if (k == "threadgroup_memory") tg_memory = py::reinterpret_borrow<py::object>(value);
    else raise(PyExc_TypeError, name_ + "() got an unexpected keyword argument '" + k +
                                    "' (it takes threads=, group_size=, threadgroup_memory=)");
  }
  if (args.size() > rt::kMaxBufferBindings)
    raise(PyExc_ValueError, name_ + "() got " + std::to_string(args.size()) +
                                " arguments; Metal binds at most 31 buffers");

  // Everything is checked and converted before anything is encoded, so a bad call
  // leaves the stream as it was.
  std::vector<Binding> bindings(args.size());
  std::optional<at::Tensor> first;
  size_t first_at = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    py::handle a = args[i];
    if (!THPVariable_Check(a.ptr())) {
      bindings[i].bytes = scalarBytes(a, i);
      continue;
    }
    const at::Tensor& t = THPVariable_Unpack(a.ptr());
    if (t.device().type() != c10::DeviceType::PrivateUse1)
      raise(PyExc_RuntimeError,
            argName(i) + " is on " + t.device().str() + "; metalx kernels take metalx tensors");
    if (!first) {
      first = t;
      first_at = i;
    } else if (t.device() != first->device()) {
      raise(PyExc_RuntimeError, argName(first_at) + " is on " + first->device().str() + " but " +
                                    argName(i) + " is on " + t.device().str() +
                                    "; all tensor arguments of a kernel must be on one device");
    }
    // The data pointer, not the storage's start: a view binds where its elements begin
    // and the kernel indexes it with the view's own strides.
    if (void* p = t.numel() ? t.data_ptr() : nullptr) {
      auto [buffer, offset] = bufferFor(p);
      bindings[i].buffer = std::move(buffer);
      bindings[i].offset = offset;
    } else {
      bindings[i].empty_tensor = true;
    }
  }

  rt::Size3 grid;
  if (!threads.is_none()) grid = parseExtent(threads, "threads", 0);
  else if (first) grid = {static_cast<uint64_t>(first->numel()), 1, 1};
  else raise(PyExc_TypeError, name_ + "() needs threads= when no argument is a tensor");

  // Lengths of the [[threadgroup(i)]] arguments, in bytes.
  std::vector<size_t> tg_lengths;
  if (isInt(tg_memory)) {
    tg_lengths.push_back(parseExtent(tg_memory, "threadgroup_memory", 0).width);
  } else if (PyList_Check(tg_memory.ptr()) || PyTuple_Check(tg_memory.ptr())) {
    for (py::handle v : tg_memory) tg_lengths.push_back(parseExtent(v, "threadgroup_memory", 0).width);
  } else if (!tg_memory.is_none()) {
    raise(PyExc_TypeError, "threadgroup_memory must be an int or a list of ints (bytes), got " +
                               std::string(Py_TYPE(tg_memory.ptr())->tp_name));
  }
  for (size_t& n : tg_lengths) n = (n + 15) / 16 * 16;  // Metal wants multiples of 16

  const c10::DeviceIndex device = first ? first->device().index() : currentDevice();
  rt::ComputePipelinePtr pipe = pipeline(device);
  checkArgumentCount(pipe, args.size());
  rt::Size3 group = group_size.is_none()
                        ? defaultGroup(grid, std::min<uint64_t>(pipe->maxTotalThreadsPerThreadgroup(), 256))
                        : parseExtent(group_size, "group_size", 1);
  if (grid.count() == 0) return;  // nothing runs (Metal skips an empty grid too)
  for (size_t i = 0; i < bindings.size(); ++i)
    if (bindings[i].empty_tensor)
      raise(PyExc_ValueError, argName(i) + " is an empty tensor: it has no memory to bind");

  std::string validation_error;
  {
    py::gil_scoped_release no_gil;
    try {
      currentStream(device).encodeCompute([&](rt::ComputeEncoder& e) {
        e.setComputePipeline(pipe);
        for (uint32_t i = 0; i < bindings.size(); ++i) {
          const Binding& b = bindings[i];
          if (b.buffer) e.setBuffer(b.buffer, b.offset, i);
          else e.setBytes(b.bytes.data(), b.bytes.size(), i);
        }
        for (uint32_t i = 0; i < tg_lengths.size(); ++i)
          if (tg_lengths[i]) e.setThreadgroupMemoryLength(tg_lengths[i], i);
        e.dispatchThreads(grid, group);
      });
    } catch (const rt::Error& e) {
      // Validation (arguments the kernel does not declare, a threadgroup too large, ...)
      // is a caller's mistake: ValueError. Anything else stays a RuntimeError.
      if (e.kind() != rt::ErrorKind::Validation) throw;
      validation_error = e.what();
    }
  }
  if (!validation_error.empty()) raise(PyExc_ValueError, validation_error);
}


}  // namespace

void registerShaderBindings(py::module_& m) {
  g_compile_error = PyErr_NewExceptionWithDoc(
      "metalx._C.ShaderCompileError",
      "Metal Shading Language source failed to compile; the message holds the compiler's "
      "diagnostics as NAME:LINE:COL: error ...",
      PyExc_RuntimeError, nullptr);
  if (!g_compile_error) throw py::error_already_set();
  m.add_object("ShaderCompileError", py::handle(g_compile_error));

  // The device's compiled-library cache (hits show a source compiled once, for tests).
  m.def("_shader_cache_stats", [](int64_t device) {
    return translated([&] {
      checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
      rt::CacheStats s = devicePipelines(static_cast<int>(device)).libraryStats();
      py::dict d;
      d["size"] = s.size;
      d["capacity"] = s.capacity;
      d["hits"] = s.hits;
      d["misses"] = s.misses;
      d["evictions"] = s.evictions;
      return d;
    });
  });

  py::class_<ShaderValue>(m, "_ShaderValue")
      .def(py::init([](py::bytes data, std::string type_name) {
             return ShaderValue{std::string(data), std::move(type_name)};
           }),
           py::arg("data"), py::arg("type_name"))
      .def_property_readonly("data", [](const ShaderValue& v) { return py::bytes(v.bytes); })
      .def_property_readonly("type_name", [](const ShaderValue& v) { return v.type_name; })
      .def_property_readonly("nbytes", [](const ShaderValue& v) { return v.bytes.size(); });

  py::class_<ShaderLibrary, std::shared_ptr<ShaderLibrary>>(m, "_ShaderLibrary")
      .def(py::init([](std::string source, std::string name, std::vector<std::string> include_dirs) {
             return translated([&] {
               return std::make_shared<ShaderLibrary>(std::move(source), std::move(name), std::move(include_dirs));
             });
           }),
           py::arg("source"), py::arg("name"), py::arg("include_dirs") = std::vector<std::string>{})
      .def_property_readonly("kernel_names", &ShaderLibrary::kernelNames)
      .def_property_readonly("source_name", &ShaderLibrary::sourceName)
      .def_property_readonly("device", [](const ShaderLibrary& l) { return static_cast<int>(l.home()); })
      .def("kernel", [](std::shared_ptr<ShaderLibrary> self, std::string name) {
        return ShaderKernel(std::move(self), std::move(name));
      });

  py::class_<ShaderKernel>(m, "_ShaderKernel")
      .def_property_readonly("name", &ShaderKernel::name)
      .def_property_readonly("max_threads_per_threadgroup", [](ShaderKernel& k) {
        return translated([&] { return k.pipeline(k.home())->maxTotalThreadsPerThreadgroup(); });
      })
      .def_property_readonly("thread_execution_width", [](ShaderKernel& k) {
        return translated([&] { return k.pipeline(k.home())->threadExecutionWidth(); });
      })
      .def("__call__", [](ShaderKernel& k, py::args args, py::kwargs kwargs) {
        translated([&] { k.call(std::move(args), std::move(kwargs)); });
      })
      // specialize({index: value}, name=value, ...): the kernel with these function
      // constant values; its pipeline is made (and checked) now.
      .def("specialize", [](const ShaderKernel& k, py::args args, py::kwargs kwargs) {
        rt::FunctionConstantValues values;
        for (py::handle a : args) {
          if (!PyDict_Check(a.ptr()))
            raise(PyExc_TypeError, "specialize() takes a dict {index: value} and/or name=value keywords");
          for (auto [key, value] : py::reinterpret_borrow<py::dict>(a)) {
            if (!isInt(key))
              raise(PyExc_TypeError, "specialize(): dict keys are function constant indices (ints), got " +
                                         std::string(Py_TYPE(key.ptr())->tp_name));
            rt::FunctionConstantValue v = constantValue(value, "function constant " + py::str(key).cast<std::string>());
            v.index = toInt64(key, "function constant index");
            values.push_back(std::move(v));
          }
        }
        for (auto [key, value] : kwargs) {
          std::string name = py::str(key);
          rt::FunctionConstantValue v = constantValue(value, "function constant '" + name + "'");
          v.name = name;
          values.push_back(std::move(v));
        }
        for (const rt::FunctionConstantValue& c : k.constants()) {  // earlier values stay unless replaced
          bool replaced = false;
          for (const auto& v : values) replaced |= c.index >= 0 ? v.index == c.index : v.name == c.name;
          if (!replaced) values.push_back(c);
        }
        ShaderKernel s = k.specialized(std::move(values));
        translated([&] {
          try {
            s.pipeline(s.home());
          } catch (const rt::Error& e) {
            if (e.kind() == rt::ErrorKind::Validation) raise(PyExc_ValueError, e.what());
            if (e.kind() == rt::ErrorKind::Compile) raise(g_compile_error, e.what());
            throw;
          }
        });
        return s;
      });
}

}  // namespace metalx
