/* The machine-dependent part of jni.h for Windows x64, for cross-building the Java binding's
 * native library with MinGW-w64 against a Linux JDK's jni.h (whose own jni_md.h is Linux's).
 * JNI's types on Windows: jint is a 32-bit long there, jlong a 64-bit integer, and exported
 * functions are marked for the DLL's export table. */
#ifndef LLM42_BINDINGS_JAVA_WINDOWS_JNI_MD_H_
#define LLM42_BINDINGS_JAVA_WINDOWS_JNI_MD_H_

#define JNIEXPORT __declspec(dllexport)
#define JNIIMPORT __declspec(dllimport)
#define JNICALL __stdcall

typedef long jint;
typedef long long jlong;
typedef signed char jbyte;

#endif /* LLM42_BINDINGS_JAVA_WINDOWS_JNI_MD_H_ */
