import CLinux
import Glibc

/// The symbolic name of an errno value (`ENOENT`, `ECONNREFUSED`), which is what people search
/// for: glibc's own table (strerrorname_np), so every value has its name, not a hand-kept few.
public func errnoName(_ code: Int32) -> String {
    if let name = appd_errno_name(code) { return String(cString: name) }
    return "errno \(code)"
}

/// `ENOENT (No such file or directory)`: the name to search for, the words to read.
public func errnoText(_ code: Int32) -> String {
    "\(errnoName(code)) (\(String(cString: strerror(code))))"
}
