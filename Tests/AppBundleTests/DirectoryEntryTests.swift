import AppBundle
import AppdBase
import Glibc
import Testing

/// `directoryEntryName` reads a readdir record in place: a record is `d_reclen` bytes, and
/// copying `d_name` (256 bytes) out of one at the end of glibc's buffer read past it.
@Suite("directory entry names")
struct DirectoryEntryTests {
    @Test("a short record right before an unreadable page is read without touching that page")
    func recordAtTheEndOfAMapping() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = try #require(
            mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        #expect(mapping != MAP_FAILED)
        defer { munmap(mapping, 2 * page) }
        // The second page faults on any access, as an unmapped neighbour would.
        #expect(mprotect(mapping + page, page, PROT_NONE) == 0)
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        // "hello" + NUL, 8-aligned, as the kernel packs it.
        let recordLength = (nameOffset + 6 + 7) & ~7
        let record = mapping + page - recordLength
        (record + nameOffset).copyMemory(from: Array("hello\0".utf8), byteCount: 6)
        let entry = record.assumingMemoryBound(to: dirent.self)
        #expect(directoryEntryName(entry) == Array("hello".utf8))
        #expect(directoryEntryString(entry) == "hello")
    }

    @Test("the names readdir gives for a real directory")
    func realDirectory() throws {
        var template = Array("/tmp/appd-dirent.XXXXXX".utf8CString)
        let path = try #require(
            template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map {
                String(cString: $0)
            })
        defer {
            rmdir(path + "/é-ü")
            rmdir(path + "/" + String(repeating: "x", count: 255))
            rmdir(path)
        }
        #expect(mkdir(path + "/é-ü", 0o700) == 0)
        #expect(mkdir(path + "/" + String(repeating: "x", count: 255), 0o700) == 0)
        let dir = try #require(opendir(path))
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) { names.append(directoryEntryString(entry)) }
        #expect(Set(names) == [".", "..", "é-ü", String(repeating: "x", count: 255)])
    }
}
