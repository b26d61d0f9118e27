import Foundation
import Glibc

/// The programs of issue 38's tests, built here with the C compiler (or written byte by byte
/// for another machine) into a bundle folder `Name.app` whose Info.plist names `executable`.
public enum ProgramBundle: String, CaseIterable, Sendable {
    /// `cc -static`: no loader, no library.
    case staticProgram = "static"
    /// Dynamic, against the host's libc only.
    case libcOnly = "libc"
    /// Dynamic, needing libgreet.so from Frameworks/ through RUNPATH `$ORIGIN/Frameworks`.
    case frameworks
    /// The same program without its Frameworks/: libgreet.so is found nowhere.
    case missingLibrary = "missing-library"
    /// An AArch64 program (ELFBuilder's bytes).
    case otherMachine = "aarch64"
    /// The libc-only program cut after 100 bytes.
    case truncated
    /// What a Linux program expects of its environment: POSIX shared memory, a writable /tmp,
    /// its own user and group names; one line each, `NAME: ok ...` or `NAME: failed ...`.
    case environment
    /// A `#!/bin/sh` script: it runs only where Info.plist's AppdHostExecutables names /bin/sh.
    case script

    static let main = """
        #include <stdio.h>
        int main(void) { printf("hello from a C program\\n"); return 0; }
        """
    static let greeter = """
        #include <stdio.h>
        const char *greeting(void);
        int main(void) { printf("%s\\n", greeting()); return 0; }
        """
    static let environmentCheck = """
        #include <errno.h>
        #include <fcntl.h>
        #include <grp.h>
        #include <pwd.h>
        #include <stdio.h>
        #include <string.h>
        #include <sys/mman.h>
        #include <unistd.h>
        int main(void) {
            int fd = shm_open("/appd-check", O_CREAT | O_RDWR | O_EXCL, 0600);
            if (fd < 0 || ftruncate(fd, 4096) != 0) {
                printf("shm_open: failed %s\\n", strerror(errno));
            } else {
                char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (p == MAP_FAILED) printf("shm_open: failed mmap %s\\n", strerror(errno));
                else { strcpy(p, "x"); printf("shm_open: ok\\n"); }
                shm_unlink("/appd-check");
            }
            FILE *f = fopen("/tmp/appd-check", "w");
            printf(f && fputs("x", f) >= 0 && fclose(f) == 0 ? "tmp: ok\\n" : "tmp: failed %s\\n", strerror(errno));
            unlink("/tmp/appd-check");
            struct passwd *pw = getpwuid(getuid());
            struct group *gr = getgrgid(getgid());
            printf(pw ? "getpwuid: ok %s\\n" : "getpwuid: failed\\n", pw ? pw->pw_name : "");
            printf(gr ? "getgrgid: ok %s\\n" : "getgrgid: failed\\n", gr ? gr->gr_name : "");
            return 0;
        }
        """
    static let library = "const char *greeting(void) { return \"hello from Frameworks\"; }\n"

    /// What the frameworks program prints when it runs.
    public static let frameworksOutput = "hello from Frameworks"
    /// What the script prints when it runs.
    public static let scriptOutput = "hello from a script"

    /// Writes `folder/Name.app` (iOS layout, app-sandbox entitlement) holding this program as
    /// `executable`, with bundle id `id` and `AppdHostExecutables` `hostExecutables`; returns
    /// the bundle's path.
    public func write(
        in folder: String, id: String, name: String = "Prog", executable: String = "Prog",
        hostExecutables: [String] = []
    ) throws -> String {
        let bundle = "\(folder)/\(name).app"
        let files = FileManager.default
        try files.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let build = "\(folder)/.build-\(rawValue)"
        try files.createDirectory(atPath: build, withIntermediateDirectories: true)
        let target = "\(bundle)/\(executable)"
        switch self {
        case .staticProgram:
            try Self.cc(["-static", "-o", target], source: Self.main, in: build)
        case .libcOnly:
            try Self.cc(["-o", target], source: Self.main, in: build)
        case .environment:
            try Self.cc(["-o", target], source: Self.environmentCheck, in: build)
        case .truncated:
            try Self.cc(["-o", "\(build)/full"], source: Self.main, in: build)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(build)/full"))
            try bytes.prefix(100).write(to: URL(fileURLWithPath: target))
        case .frameworks, .missingLibrary:
            try files.createDirectory(
                atPath: "\(build)/lib", withIntermediateDirectories: true)
            try Self.cc(
                ["-shared", "-fPIC", "-o", "\(build)/lib/libgreet.so"], source: Self.library,
                in: build)
            try Self.cc(
                [
                    "-o", target, "-L\(build)/lib", "-Wl,--enable-new-dtags",
                    "-Wl,-rpath,$ORIGIN/Frameworks",
                ], source: Self.greeter, in: build, libraries: ["-lgreet"])
            if self == .frameworks {
                try files.createDirectory(
                    atPath: "\(bundle)/Frameworks", withIntermediateDirectories: true)
                try files.copyItem(
                    atPath: "\(build)/lib/libgreet.so", toPath: "\(bundle)/Frameworks/libgreet.so")
                chmod("\(bundle)/Frameworks/libgreet.so", 0o644)
            }
        case .otherMachine:
            try Data(ELFBuilder.aarch64().bytes).write(to: URL(fileURLWithPath: target))
        case .script:
            try "#!/bin/sh\necho \(Self.scriptOutput)\n".write(
                toFile: target, atomically: false, encoding: .utf8)
        }
        chmod(target, 0o755)
        try? files.removeItem(atPath: build)
        let plist = { (body: String) in
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>\(body)</dict></plist>
            """
        }
        try plist(
            """
            <key>CFBundleIdentifier</key><string>\(id)</string><key>CFBundleExecutable</key><string>\(executable)</string>
            <key>CFBundleName</key><string>\(name)</string><key>CFBundleVersion</key><string>1</string>
            <key>CFBundleShortVersionString</key><string>1.0</string>
            <key>CFBundlePackageType</key><string>APPL</string>
            """
                + (hostExecutables.isEmpty
                    ? ""
                    : "<key>AppdHostExecutables</key><array>"
                        + hostExecutables.map { "<string>\($0)</string>" }.joined() + "</array>")
        ).write(toFile: "\(bundle)/Info.plist", atomically: true, encoding: .utf8)
        try plist("<key>com.apple.security.app-sandbox</key><true/>")
            .write(toFile: "\(bundle)/Entitlements.plist", atomically: true, encoding: .utf8)
        return bundle
    }

    static func cc(
        _ flags: [String], source: String, in folder: String, libraries: [String] = []
    ) throws {
        let file = "\(folder)/source-\(UUID().uuidString).c"
        try source.write(toFile: file, atomically: false, encoding: .utf8)
        let result = try runTool("/usr/bin/cc", flags + [file] + libraries)
        guard result.code == 0 else {
            throw ProgramBuildFailure(
                message: "cc \(flags.joined(separator: " ")): \(result.output)")
        }
    }
}

public struct ProgramBuildFailure: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
